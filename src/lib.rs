//! web_crawler
