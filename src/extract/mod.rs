//! HTML → title, headings, visible text and links.
//!
//! Built on html5gum's streaming tokenizer with a small amount of tree-builder knowledge
//! (raw-text elements, foreign content, skip regions) tracked in counters and flags: no DOM is
//! built, no per-token allocation happens on the hot path, and nothing here can panic on
//! malformed input.
//!
//! `charset` sniffs and decodes the body, `tokenizer` walks html5gum's tokens
//! and uses the element tables of `tags` to decide what each tag means.

use std::collections::HashMap;
use url::Url;

use crate::normalize::NormalizeOptions;

mod boilerplate;
mod charset;
mod outline;
#[cfg(test)]
mod proptests;
pub mod sitemap;
mod tags;
mod tokenizer;

pub use charset::{decode_body, is_html};
pub use tokenizer::extract_html;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkSource {
    Anchor,
    Area,
    Canonical,
    Alternate,
    Frame,
    IFrame,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedLink {
    /// resolved + normalized
    pub url: Url,
    pub source: LinkSource,
    /// rel=nofollow on the element
    pub nofollow: bool,
    /// An `<a>`'s visible text, whitespace-collapsed, at most 200 bytes;
    /// empty when visible text was not asked for, or in nav and footer.
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extracted {
    /// whitespace-collapsed, trimmed
    pub title: Option<String>,
    /// h1..h6 text, in order, whitespace-collapsed
    pub headings: Vec<String>,
    /// Where `text`'s sections start (see `outline`), in order.
    pub sections: Vec<web_crawler_actors::SectionStart>,
    /// The page's own visible text: whitespace collapsed to single spaces,
    /// excluding script, style, noscript, template, nav, footer, head
    /// content, svg, and the site's chrome (sidebars, menus, breadcrumbs,
    /// link lists: see `boilerplate`); its main region (`<main>`,
    /// `<article>`, `role=main`) alone when it marks one of 200 bytes or
    /// more. Headings are included, and the title unless the main region
    /// stands alone.
    pub text: String,
    /// The start of all visible text (chrome included), up to
    /// `traps::SIMHASH_TEXT_BYTES`: see `ExtractedPage::visible_head`.
    pub visible_head: String,
    /// document order, de-duplicated by url keeping the first
    pub links: Vec<ExtractedLink>,
    /// hrefs that were present but could not be resolved or are not http(s)
    pub invalid_links: usize,
    /// hrefs left unresolved because the page's links had reached their
    /// budget (twice the page's bytes, and 1 MB): a long page URL and many
    /// short relative hrefs would hold far more links than the page.
    pub links_over_budget: usize,
    /// effective `<base href>`, if any
    pub base: Option<Url>,
    /// `<meta name="robots" content="...nofollow...">` (or "none")
    pub meta_nofollow: bool,
    /// `<meta name="robots" content="...noindex...">` (or "none")
    pub meta_noindex: bool,
}

/// The tree's extract behaviour: decode, tokenize, hand on the links the
/// page allows to be followed.
#[derive(Clone, Debug, Default)]
pub struct HtmlExtractor {
    normalize: NormalizeOptions,
}

impl HtmlExtractor {
    pub fn new(normalize: NormalizeOptions) -> Self {
        Self { normalize }
    }

    /// A sitemap's links: its `<loc>` URLs, resolved and normalized.
    fn sitemap(
        &self,
        url: &str,
        body: &[u8],
        content_hash: u64,
    ) -> web_crawler_actors::ExtractedPage {
        let map = sitemap::parse(body);
        let base = Url::parse(url).ok();
        let mut links = Vec::with_capacity(map.entries.len());
        let mut modified = HashMap::new();
        for entry in &map.entries {
            let Some(link) = base
                .as_ref()
                .and_then(|base| crate::normalize::resolve(base, &entry.loc, &self.normalize).ok())
            else {
                continue;
            };
            if let Some(at) = entry.lastmod {
                modified.insert(link.to_string(), at);
            }
            links.push(link);
        }
        if let Some(problem) = &map.problem {
            tracing::info!(%url, %problem, "sitemap read in part");
        }
        web_crawler_actors::ExtractedPage {
            links_found: map.entries.len(),
            links,
            modified,
            content_hash,
            problem: map.problem,
            ..Default::default()
        }
    }
}

/// Bytes looked at to sniff HTML when the Content-Type is missing.
const SNIFF_BYTES: usize = 512;

impl web_crawler_actors::Extractor for HtmlExtractor {
    fn extract(
        &self,
        url: &str,
        page: &web_crawler_actors::FetchedPage,
        text_limit: usize,
    ) -> web_crawler_actors::ExtractedPage {
        let content_hash = xxhash_rust::xxh3::xxh3_64(&page.body);
        let content_type = page.content_type.as_deref();
        if sitemap::is_sitemap(url, content_type, &page.body) {
            return self.sitemap(url, &page.body, content_hash);
        }
        let html = is_html(content_type, &page.body[..page.body.len().min(SNIFF_BYTES)]);
        let textual = html
            || content_type.is_some_and(|c| {
                let c = c.to_ascii_lowercase();
                c.starts_with("text/") || c.contains("xml") || c.contains("json")
            });
        if !textual {
            return web_crawler_actors::ExtractedPage {
                content_hash,
                ..Default::default()
            };
        }
        let (document, _) = decode_body(&page.body, content_type);
        let Some(page_url) = html.then(|| Url::parse(url).ok()).flatten() else {
            return web_crawler_actors::ExtractedPage {
                document,
                content_hash,
                ..Default::default()
            };
        };
        let found = extract_html(&document, &page_url, &self.normalize, text_limit);
        let links_found = found.links.len() + found.invalid_links + found.links_over_budget;
        let (links, anchors): (Vec<Url>, Vec<String>) = if found.meta_nofollow {
            Default::default()
        } else {
            found
                .links
                .into_iter()
                .filter(|l| !l.nofollow)
                .map(|l| (l.url, l.text))
                .unzip()
        };
        let anchors = if text_limit > 0 { anchors } else { Vec::new() };
        web_crawler_actors::ExtractedPage {
            links_found,
            links,
            anchors,
            noindex: found.meta_noindex,
            is_html: true,
            title: found.title,
            headings: found.headings,
            text: found.text,
            sections: found.sections,
            visible_head: found.visible_head,
            document,
            content_hash,
            problem: None,
            modified: HashMap::new(),
        }
    }
}
