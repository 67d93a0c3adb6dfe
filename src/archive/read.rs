//! Pages read back from an archive directory, found through its indexes.

use super::record::CdxEntry;
use super::{WarcError, io_error, read_indexes};
use flate2::read::GzDecoder;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use warc::{WarcHeader, WarcReader};
use web_crawler_actors::FetchedPage;

/// The latest response archived for each URL in a directory's closed files.
#[derive(Debug)]
pub struct ArchiveReader {
    dir: PathBuf,
    latest: HashMap<String, CdxEntry>,
}

impl ArchiveReader {
    /// Read the indexes (`*.cdxj`) of `dir`; none there: an empty archive.
    pub fn open(dir: &Path) -> Result<Self, WarcError> {
        let mut latest = HashMap::new();
        // Oldest first: a later response replaces an earlier one. A revisit
        // says the latest response still holds.
        for (_, entry) in read_indexes(dir)? {
            if entry.mime != "warc/revisit" {
                latest.insert(entry.url.clone(), entry);
            }
        }
        Ok(ArchiveReader {
            dir: dir.to_path_buf(),
            latest,
        })
    }

    /// How many URLs have a response archived.
    pub fn len(&self) -> usize {
        self.latest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    /// The latest response archived for `url`, as the fetcher gave it.
    pub fn page(&self, url: &str) -> Result<Option<FetchedPage>, WarcError> {
        let Some(entry) = self.latest.get(url) else {
            return Ok(None);
        };
        let path = self.dir.join(&entry.filename);
        let damaged = |reason: String| WarcError::Damaged {
            file: entry.filename.clone(),
            offset: entry.offset().unwrap_or(0),
            reason,
        };
        let (Some(offset), Some(length)) = (entry.offset(), entry.length()) else {
            return Err(damaged("no offset or length in its index line".into()));
        };
        let mut member = vec![0; usize::try_from(length).unwrap_or(usize::MAX)];
        File::open(&path)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(offset))?;
                f.read_exact(&mut member)
            })
            .map_err(io_error(format!("cannot read {}", path.display())))?;
        let reader = WarcReader::new(BufReader::new(GzDecoder::new(&member[..])));
        let record = reader
            .iter_records()
            .next()
            .ok_or_else(|| damaged("no record".into()))?
            .map_err(|e| damaged(e.to_string()))?;
        if record.header(WarcHeader::TargetURI).as_deref() != Some(url) {
            return Err(damaged(format!("it is not the record of {url}")));
        }
        let block = record.body();
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut response = httparse::Response::new(&mut headers);
        let head_len = match response.parse(block) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Err(damaged("a cut HTTP head".into())),
            Err(e) => return Err(damaged(format!("its HTTP head: {e}"))),
        };
        let find = |name: &str| {
            response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).into_owned())
        };
        Ok(Some(FetchedPage {
            status: response.code.unwrap_or_default(),
            content_type: find("content-type"),
            content_length: find("content-length").and_then(|v| v.trim().parse().ok()),
            server: find("server"),
            location: find("location"),
            body: block[head_len..].to_vec(),
            truncated: record.header(WarcHeader::Truncated).is_some(),
            http_version: format!("HTTP/1.{}", response.version.unwrap_or(1)),
            response_headers: response
                .headers
                .iter()
                .map(|h| (h.name.to_string(), h.value.to_vec()))
                .collect(),
            ..FetchedPage::default()
        }))
    }
}
