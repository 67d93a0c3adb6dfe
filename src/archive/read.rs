//! Pages read back from an archive directory, found through its indexes.

use super::record::CdxEntry;
use super::{WarcError, io_error, read_indexes_counted};
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
    /// Index lines that could not be read (cut by a crash, damaged).
    skipped: usize,
}

impl ArchiveReader {
    /// Read the indexes (`*.cdxj`) of `dir`; none there: an empty archive.
    pub fn open(dir: &Path) -> Result<Self, WarcError> {
        let mut latest = HashMap::new();
        let (entries, skipped) = read_indexes_counted(dir)?;
        if skipped > 0 {
            tracing::warn!(dir = %dir.display(), skipped, "index lines that cannot be read are skipped");
        }
        // Oldest first: a later response replaces an earlier one. A revisit
        // says the latest response still holds.
        for (_, entry) in entries {
            if entry.mime != "warc/revisit" {
                latest.insert(entry.url.clone(), entry);
            }
        }
        Ok(ArchiveReader {
            dir: dir.to_path_buf(),
            latest,
            skipped,
        })
    }

    /// How many index lines were skipped as unreadable: their pages are
    /// not found here (and are fetched again).
    pub fn skipped(&self) -> usize {
        self.skipped
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
        let damaged = |reason: String| WarcError::Damaged {
            file: entry.filename.clone(),
            offset: entry.offset().unwrap_or(0),
            reason,
        };
        // A file of this directory, named by its index line: nothing else.
        if Path::new(&entry.filename).file_name() != Some(entry.filename.as_ref()) {
            return Err(damaged(
                "its index line names no file of the archive".into(),
            ));
        }
        let path = self.dir.join(&entry.filename);
        let (Some(offset), Some(length)) = (entry.offset(), entry.length()) else {
            return Err(damaged("no offset or length in its index line".into()));
        };
        let mut file =
            File::open(&path).map_err(io_error(format!("cannot read {}", path.display())))?;
        let file_len = file
            .metadata()
            .map_err(io_error(format!("cannot read {}", path.display())))?
            .len();
        // Checked before anything is allocated: a damaged line may say any length.
        if offset.checked_add(length).is_none_or(|end| end > file_len) {
            return Err(damaged(format!(
                "its index line says {length} bytes at {offset}, past the file's {file_len}"
            )));
        }
        let mut member = vec![0; usize::try_from(length).unwrap_or(usize::MAX)];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut member))
            .map_err(io_error(format!("cannot read {}", path.display())))?;
        // Gunzipped whole first, so that its checksum is checked before
        // any of it is parsed.
        let mut record_bytes = Vec::new();
        GzDecoder::new(&member[..])
            .read_to_end(&mut record_bytes)
            .map_err(|e| damaged(format!("it does not gunzip: {e}")))?;
        let reader = WarcReader::new(BufReader::new(&record_bytes[..]));
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
