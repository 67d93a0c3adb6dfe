//! Web archives: responses kept as WARC/1.1 records, with a CDXJ index.
//!
//! A [`WarcArchive`] is the node's writer for one directory, shared by its
//! slaves (the tree's [`Archive`] behaviour). Each response becomes a
//! `request` and a `response` record (or a `revisit`, see [`record::kind`]),
//! each record its own gzip member, and an exchange is written with one
//! `write` so that a crash leaves whole members. A file in progress is
//! `NAME.warc.gz.open` with its index lines in `NAME.cdxj.open`; at
//! `--warc-max-size` (or [`WarcArchive::close`]) it becomes `NAME.warc.gz`
//! and `NAME.cdxj`, the index sorted (written first: for an instant it
//! names a file still `.open`). Files left open by a killed process, in
//! progress or half closed, are closed by the next writer of the same node
//! name (at its first record, or as its run begins:
//! [`WarcArchive::resume`]), cut after their last indexed record.
//! [`ArchiveReader`] reads pages back.

mod read;
pub mod record;

pub use read::ArchiveReader;

use crate::kill_points::{self, KillPoint};
use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;
use record::{Archived, CdxEntry, Kind};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use warc::{BufferedBody, Record, WarcHeader};
use web_crawler_actors::{Archive, ArchiveError, FetchedPage, async_trait};

/// Default size at which a file is closed and the next one begun: 1 GB.
pub const DEFAULT_MAX_SIZE: u64 = 1_000_000_000;

const OPEN: &str = ".open";
const WARC_EXT: &str = ".warc.gz";
const CDXJ_EXT: &str = ".cdxj";

/// Why the archive could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum WarcError {
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("a damaged record in {file} at {offset}: {reason}")]
    Damaged {
        file: String,
        offset: u64,
        reason: String,
    },
}

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> WarcError {
    let context = context.into();
    move |source| WarcError::Io { context, source }
}

/// The archive directory's writer for this process (share it: one per
/// directory).
#[derive(Debug)]
pub struct WarcArchive {
    dir: PathBuf,
    /// Every response, or only those of archiving operations (`mirror`).
    everything: bool,
    writer: Arc<Mutex<Writer>>,
}

#[derive(Debug)]
struct Writer {
    dir: PathBuf,
    /// The node name as file names carry it.
    node: String,
    max_size: u64,
    serial: u32,
    file: Option<OpenFile>,
    /// The last 200 archived per URL, for revisits: from this directory's
    /// indexes on first use, then kept up to date.
    last: Option<HashMap<String, Archived>>,
}

#[derive(Debug)]
struct OpenFile {
    /// `NAME.warc.gz`, without `.open`.
    name: String,
    warc: File,
    cdxj: File,
    size: u64,
    warcinfo_id: String,
}

impl WarcArchive {
    /// The writer for `dir` (created on the first record): files named
    /// after `node`, closed at `max_size` bytes; `everything`: every
    /// response the node gets, else those of archiving operations.
    pub fn new(dir: &Path, node: &str, max_size: u64, everything: bool) -> Self {
        let node: String = node
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        WarcArchive {
            dir: dir.to_path_buf(),
            everything,
            writer: Arc::new(Mutex::new(Writer {
                dir: dir.to_path_buf(),
                node,
                max_size: max_size.max(1),
                serial: 0,
                file: None,
                last: None,
            })),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Archive one response to a GET of `url` (blocking: file I/O and gzip).
    pub fn write(&self, url: &str, page: &FetchedPage) -> Result<(), WarcError> {
        self.lock().write(url, page, Utc::now())
    }

    /// Close the files a killed run of this node left open in the
    /// directory, as the first record would: at the start of a run, so that
    /// one that archives nothing leaves none open either. Call it only
    /// while this process holds the crawl (the store's lock): the files of
    /// a live writer of the same node name would be cut.
    pub fn resume(&self) -> Result<(), WarcError> {
        let mut writer = self.lock();
        if writer.dir.is_dir() {
            writer.last()?;
        }
        Ok(())
    }

    /// Close the file in progress (renamed, its index sorted); the next
    /// record begins a new one.
    pub fn close(&self) -> Result<(), WarcError> {
        self.lock().close()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Writer> {
        // A panic mid-write leaves at worst a record the next open drops.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for WarcArchive {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("{e}");
        }
    }
}

#[async_trait]
impl Archive for WarcArchive {
    fn keeps_everything(&self) -> bool {
        self.everything
    }

    async fn keep(&self, url: &str, page: &FetchedPage) -> Result<(), ArchiveError> {
        let writer = self.writer.clone();
        let (owned_url, page) = (url.to_string(), page.clone());
        let done = tokio::task::spawn_blocking(move || {
            writer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .write(&owned_url, &page, Utc::now())
        })
        .await;
        let error = |context: String, source: web_crawler_actors::BoxError| ArchiveError {
            url: url.to_string(),
            context,
            source,
        };
        match done {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(error(format!("in {}", self.dir.display()), Box::new(e))),
            Err(e) => Err(error("the writer task failed".into(), Box::new(e))),
        }
    }
}

/// Header values of a record, in the crate's form.
fn header(name: WarcHeader, value: impl Into<Vec<u8>>) -> (WarcHeader, Vec<u8>) {
    (name, value.into())
}

fn unknown(name: &str, value: impl Into<Vec<u8>>) -> (WarcHeader, Vec<u8>) {
    (WarcHeader::Unknown(name.to_string()), value.into())
}

/// One record as a gzip member, its header fields in the order
/// [`field_order`] gives and named as the WARC 1.1 specification spells
/// them ([`spec_name`]). Written here rather than by the warc crate's
/// writer, which names every field in lower case (`warc-type`): the format
/// allows any case, but archive tools write, and scripts grep for, the
/// specification's spelling.
fn gzip_record(
    mut headers: Vec<(WarcHeader, Vec<u8>)>,
    block: &[u8],
    out: &mut Vec<u8>,
) -> io::Result<()> {
    headers.push((
        WarcHeader::BlockDigest,
        record::sha1_digest(block).into_bytes(),
    ));
    headers.push((
        WarcHeader::ContentLength,
        block.len().to_string().into_bytes(),
    ));
    headers.sort_by_key(|(name, _)| field_order(name));
    let mut gz = GzEncoder::new(std::mem::take(out), Compression::default());
    gz.write_all(b"WARC/1.1\r\n")?;
    for (name, value) in &headers {
        gz.write_all(spec_name(name).as_bytes())?;
        gz.write_all(b": ")?;
        gz.write_all(value)?;
        gz.write_all(b"\r\n")?;
    }
    gz.write_all(b"\r\n")?;
    gz.write_all(block)?;
    gz.write_all(b"\r\n\r\n")?;
    *out = gz.finish()?;
    Ok(())
}

/// A header field's name as the WARC 1.1 specification spells it; a
/// field the warc crate does not know keeps the spelling it was given.
fn spec_name(name: &WarcHeader) -> &str {
    match name {
        WarcHeader::ContentLength => "Content-Length",
        WarcHeader::ContentType => "Content-Type",
        WarcHeader::BlockDigest => "WARC-Block-Digest",
        WarcHeader::ConcurrentTo => "WARC-Concurrent-To",
        WarcHeader::Date => "WARC-Date",
        WarcHeader::Filename => "WARC-Filename",
        WarcHeader::IdentifiedPayloadType => "WARC-Identified-Payload-Type",
        WarcHeader::IPAddress => "WARC-IP-Address",
        WarcHeader::PayloadDigest => "WARC-Payload-Digest",
        WarcHeader::Profile => "WARC-Profile",
        WarcHeader::RecordID => "WARC-Record-ID",
        WarcHeader::RefersTo => "WARC-Refers-To",
        WarcHeader::SegmentNumber => "WARC-Segment-Number",
        WarcHeader::SegmentOriginID => "WARC-Segment-Origin-ID",
        WarcHeader::SegmentTotalLength => "WARC-Segment-Total-Length",
        WarcHeader::TargetURI => "WARC-Target-URI",
        WarcHeader::Truncated => "WARC-Truncated",
        WarcHeader::WarcType => "WARC-Type",
        WarcHeader::WarcInfoID => "WARC-Warcinfo-ID",
        WarcHeader::Unknown(name) => name,
    }
}

/// Where a field goes in a record's header, as archive tools order them:
/// what the record is first, then what it is of, then its block.
fn field_order(name: &WarcHeader) -> u8 {
    match name {
        WarcHeader::WarcType => 0,
        WarcHeader::RecordID => 1,
        WarcHeader::Date => 2,
        WarcHeader::TargetURI => 3,
        WarcHeader::Filename => 4,
        WarcHeader::IPAddress => 5,
        WarcHeader::WarcInfoID => 6,
        WarcHeader::ConcurrentTo => 7,
        WarcHeader::Profile => 8,
        WarcHeader::RefersTo => 9,
        WarcHeader::Unknown(_)
        | WarcHeader::IdentifiedPayloadType
        | WarcHeader::SegmentNumber
        | WarcHeader::SegmentOriginID
        | WarcHeader::SegmentTotalLength => 10,
        WarcHeader::Truncated => 11,
        WarcHeader::PayloadDigest => 12,
        WarcHeader::ContentType => 13,
        WarcHeader::BlockDigest => 14,
        WarcHeader::ContentLength => 15,
    }
}

fn record_id() -> String {
    Record::<BufferedBody>::generate_record_id()
}

impl Writer {
    fn write(
        &mut self,
        url: &str,
        page: &FetchedPage,
        now: DateTime<Utc>,
    ) -> Result<(), WarcError> {
        let parsed = url::Url::parse(url).map_err(|e| WarcError::Io {
            context: format!("cannot archive {url}"),
            source: io::Error::new(io::ErrorKind::InvalidInput, e),
        })?;
        let last = self.last()?;
        let payload_digest = record::sha1_digest(&page.body);
        let kind = record::kind(page.status, &payload_digest, last.get(url));
        let previous = last.get(url).cloned();
        let date = record::warc_date(now);

        let file = self.file()?;
        let (response_id, request_id) = (record_id(), record_id());
        let mut common = vec![
            header(WarcHeader::Date, date.clone()),
            header(WarcHeader::TargetURI, url),
            header(WarcHeader::WarcInfoID, file.warcinfo_id.clone()),
            header(
                WarcHeader::ContentType,
                "application/http; msgtype=response",
            ),
        ];
        if let Some(ip) = page.remote_ip {
            common.push(header(WarcHeader::IPAddress, ip.to_string()));
        }
        let head = record::response_head(page);
        let mut headers = common;
        headers.push(header(WarcHeader::RecordID, response_id.clone()));
        let (block, mime, digest) = match kind {
            Kind::Response => {
                headers.push(header(WarcHeader::WarcType, "response"));
                headers.push(header(WarcHeader::PayloadDigest, payload_digest.clone()));
                if page.truncated {
                    headers.push(header(WarcHeader::Truncated, "length"));
                }
                let mime = page
                    .content_type
                    .as_deref()
                    .and_then(|t| t.split(';').next())
                    .map_or("unk", str::trim)
                    .to_ascii_lowercase();
                (
                    [head, page.body.clone()].concat(),
                    mime,
                    payload_digest.clone(),
                )
            }
            Kind::Revisit(profile) => {
                headers.push(header(WarcHeader::WarcType, "revisit"));
                headers.push(header(WarcHeader::Profile, profile));
                // A 304 has no payload: it stands for the last one archived.
                let digest = match (page.status, &previous) {
                    (304, Some(p)) => p.digest.clone(),
                    (304, None) => String::new(),
                    _ => payload_digest.clone(),
                };
                if !digest.is_empty() {
                    headers.push(header(WarcHeader::PayloadDigest, digest.clone()));
                }
                if let Some(p) = &previous {
                    headers.push(unknown("WARC-Refers-To-Target-URI", url));
                    headers.push(unknown("WARC-Refers-To-Date", p.date.clone()));
                }
                (head, "warc/revisit".to_string(), digest)
            }
        };
        let request = vec![
            header(WarcHeader::WarcType, "request"),
            header(WarcHeader::RecordID, request_id),
            header(WarcHeader::Date, date.clone()),
            header(WarcHeader::TargetURI, url),
            header(WarcHeader::WarcInfoID, file.warcinfo_id.clone()),
            header(WarcHeader::ConcurrentTo, response_id),
            header(WarcHeader::ContentType, "application/http; msgtype=request"),
        ];

        let mut bytes = Vec::new();
        gzip_record(request, &record::request_head(&parsed, page), &mut bytes)
            .map_err(io_error("cannot build a record"))?;
        let response_at = bytes.len();
        let mut member = Vec::new();
        gzip_record(headers, &block, &mut member).map_err(io_error("cannot build a record"))?;
        bytes.extend_from_slice(&member);

        let entry = CdxEntry {
            url: url.to_string(),
            mime,
            status: page.status.to_string(),
            digest,
            length: member.len().to_string(),
            offset: (file.size + response_at as u64).to_string(),
            filename: file.name.clone(),
        };
        let line = record::cdxj_line(&parsed, &record::timestamp14(now), &entry);
        let name = file.name.clone();
        kill_points::write_all(KillPoint::WarcWrite, &mut file.warc, &bytes)
            .map_err(io_error(format!("cannot write {name}{OPEN}")))?;
        file.size += bytes.len() as u64;
        // After the records: an index line never points past the file.
        file.cdxj
            .write_all(format!("{line}\n").as_bytes())
            .map_err(io_error(format!("cannot write the index of {name}")))?;
        let full = file.size >= self.max_size;
        if page.status == 200 && kind == Kind::Response {
            self.last()?.insert(
                url.to_string(),
                Archived {
                    digest: payload_digest,
                    date,
                },
            );
        }
        if full {
            self.close()?;
        }
        Ok(())
    }

    /// The last 200 per URL, read from the directory's indexes once.
    fn last(&mut self) -> Result<&mut HashMap<String, Archived>, WarcError> {
        if self.last.is_none() {
            fs::create_dir_all(&self.dir)
                .map_err(io_error(format!("cannot create {}", self.dir.display())))?;
            self.recover()?;
            let mut last = HashMap::new();
            for (timestamp, entry) in read_indexes(&self.dir)? {
                if entry.status == "200" && entry.mime != "warc/revisit" {
                    let date = chrono::NaiveDateTime::parse_from_str(&timestamp, "%Y%m%d%H%M%S")
                        .map(|t| record::warc_date(t.and_utc()))
                        .unwrap_or_default();
                    last.insert(
                        entry.url,
                        Archived {
                            digest: entry.digest,
                            date,
                        },
                    );
                }
            }
            self.last = Some(last);
        }
        Ok(self.last.as_mut().expect("just filled"))
    }

    /// The file in progress, begun (with its warcinfo record) if none is.
    fn file(&mut self) -> Result<&mut OpenFile, WarcError> {
        if self.file.is_none() {
            let now = Utc::now();
            let name = format!(
                "web_crawler-{}{:03}-{:05}-{}{WARC_EXT}",
                record::timestamp14(now),
                now.timestamp_subsec_millis(),
                self.serial,
                self.node
            );
            self.serial += 1;
            let path = self.dir.join(format!("{name}{OPEN}"));
            let open = |path: &Path| {
                OpenOptions::new()
                    .create_new(true)
                    .append(true)
                    .open(path)
                    .map_err(io_error(format!("cannot create {}", path.display())))
            };
            let mut warc = open(&path)?;
            let cdxj = open(&self.dir.join(format!("{}{CDXJ_EXT}{OPEN}", stem(&name))))?;
            let warcinfo_id = record_id();
            let fields = format!(
                "software: web_crawler/{}\r\nformat: WARC File Format 1.1\r\n\
                 conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n\
                 hostname: {}\r\n",
                env!("CARGO_PKG_VERSION"),
                self.node
            );
            let mut bytes = Vec::new();
            gzip_record(
                vec![
                    header(WarcHeader::WarcType, "warcinfo"),
                    header(WarcHeader::RecordID, warcinfo_id.clone()),
                    header(WarcHeader::Date, record::warc_date(now)),
                    header(WarcHeader::Filename, name.clone()),
                    header(WarcHeader::ContentType, "application/warc-fields"),
                ],
                fields.as_bytes(),
                &mut bytes,
            )
            .map_err(io_error("cannot build a record"))?;
            warc.write_all(&bytes)
                .map_err(io_error(format!("cannot write {}", path.display())))?;
            self.file = Some(OpenFile {
                name,
                warc,
                cdxj,
                size: bytes.len() as u64,
                warcinfo_id,
            });
        }
        Ok(self.file.as_mut().expect("just opened"))
    }

    fn close(&mut self) -> Result<(), WarcError> {
        match self.file.take() {
            Some(file) => {
                drop(file.cdxj);
                file.warc
                    .sync_all()
                    .map_err(io_error(format!("cannot write {}", file.name)))?;
                finish(&self.dir, &file.name, None)
            }
            None => Ok(()),
        }
    }

    /// Close the files a killed process of this node left open: a file
    /// in progress, or one whose closing ([`finish`]) was cut short.
    fn recover(&mut self) -> Result<(), WarcError> {
        let suffix = format!("-{}", self.node);
        let mut names = std::collections::BTreeSet::new();
        for entry in fs::read_dir(&self.dir)
            .map_err(io_error(format!("cannot read {}", self.dir.display())))?
        {
            let entry = entry.map_err(io_error(format!("cannot read {}", self.dir.display())))?;
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let Some(open) = file_name.strip_suffix(OPEN) else {
                continue;
            };
            let stem = open
                .strip_suffix(WARC_EXT)
                .or_else(|| open.strip_suffix(CDXJ_EXT));
            if let Some(stem) = stem.filter(|s| s.ends_with(&suffix)) {
                names.insert(format!("{stem}{WARC_EXT}"));
            }
        }
        for name in names {
            let open_warc = self.dir.join(format!("{name}{OPEN}"));
            // A file still open is cut after its last record whole; one
            // already renamed keeps what it has (its closing was cut short
            // after the rename), and one removed keeps nothing.
            let on_disk = [open_warc.as_path(), &self.dir.join(&name)]
                .into_iter()
                .find_map(|path| fs::metadata(path).ok())
                .map_or(0, |m| m.len());
            // A record an index line points at may be missing after a
            // power cut (the index reached the disk, the WARC file's
            // tail did not): the cut is after the last record whole.
            let end = index_lines(&self.dir.join(format!("{}{CDXJ_EXT}{OPEN}", stem(&name))))?
                .iter()
                .filter_map(|(_, e)| record_end(e))
                .filter(|&end| end <= on_disk)
                .max();
            tracing::warn!("closing {name}, left open by an earlier run");
            finish(&self.dir, &name, Some(end.unwrap_or(0)))?;
        }
        Ok(())
    }
}

/// Where an index line's record ends in its file.
fn record_end(entry: &CdxEntry) -> Option<u64> {
    entry.offset()?.checked_add(entry.length()?)
}

/// `NAME` of `NAME.warc.gz`.
fn stem(name: &str) -> &str {
    name.strip_suffix(WARC_EXT).unwrap_or(name)
}

/// Close `NAME.warc.gz.open` (cut to `cut` bytes, for one left by a crash;
/// removed if that leaves no record) and sort its index into `NAME.cdxj`.
/// A kill at any step leaves what the next run's [`Writer::recover`]
/// finishes: the index is written before the WARC file is renamed, and
/// `NAME.cdxj.open` goes last.
fn finish(dir: &Path, name: &str, cut: Option<u64>) -> Result<(), WarcError> {
    let open_warc = dir.join(format!("{name}{OPEN}"));
    let open_cdxj = dir.join(format!("{}{CDXJ_EXT}{OPEN}", stem(name)));
    let mut lines: Vec<String> = index_lines(&open_cdxj)?
        .into_iter()
        // Lines of records the cut leaves out go with them.
        .filter(|(_, e)| cut.is_none_or(|cut| record_end(e).is_some_and(|end| end <= cut)))
        .map(|(line, _)| line)
        .collect();
    if lines.is_empty() {
        for path in [&open_warc, &open_cdxj] {
            remove_if_there(path)?;
        }
        return Ok(());
    }
    let still_open = open_warc.exists();
    if let (Some(len), true) = (cut, still_open) {
        OpenOptions::new()
            .write(true)
            .open(&open_warc)
            .and_then(|f| f.set_len(len))
            .map_err(io_error(format!("cannot cut {}", open_warc.display())))?;
    }
    lines.sort();
    let cdxj = dir.join(format!("{}{CDXJ_EXT}", stem(name)));
    let tmp = dir.join(format!("{}{CDXJ_EXT}.tmp", stem(name)));
    fs::write(&tmp, lines.join("\n") + "\n")
        .and_then(|()| fs::rename(&tmp, &cdxj))
        .map_err(io_error(format!("cannot write {}", cdxj.display())))?;
    if still_open {
        fs::rename(&open_warc, dir.join(name))
            .map_err(io_error(format!("cannot rename {}", open_warc.display())))?;
    }
    remove_if_there(&open_cdxj)
}

/// Remove the file at `path`, if there is one.
fn remove_if_there(path: &Path) -> Result<(), WarcError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(io_error(format!("cannot remove {}", path.display()))(e))
        }
        _ => Ok(()),
    }
}

/// The whole lines of an index file that parse (a crash may cut the last),
/// each with its entry.
fn index_lines(path: &Path) -> Result<Vec<(String, CdxEntry)>, WarcError> {
    Ok(read_index_lines(path)?.0)
}

/// [`index_lines`], and how many lines with text on them were skipped as
/// no index line (cut by a crash, damaged on disk).
fn read_index_lines(path: &Path) -> Result<(Vec<(String, CdxEntry)>, usize), WarcError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(io_error(format!("cannot read {}", path.display()))(e)),
    };
    let mut out = Vec::new();
    let mut skipped = 0;
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(io_error(format!("cannot read {}", path.display())))?;
        let parsed = String::from_utf8(line)
            .map_err(|e| e.into_bytes())
            .map(|line| (record::parse_cdxj_line(&line), line));
        match parsed {
            Ok((Some((_, entry)), line)) => out.push((line, entry)),
            Ok((None, line)) if line.trim().is_empty() => {}
            Ok((None, _)) | Err(_) => skipped += 1,
        }
    }
    Ok((out, skipped))
}

/// Every entry of the closed indexes (`*.cdxj`) in `dir`, with its timestamp.
fn read_indexes(dir: &Path) -> Result<Vec<(String, CdxEntry)>, WarcError> {
    Ok(read_indexes_counted(dir)?.0)
}

/// [`read_indexes`], and how many index lines were skipped as unreadable.
fn read_indexes_counted(dir: &Path) -> Result<(Vec<(String, CdxEntry)>, usize), WarcError> {
    let mut out = Vec::new();
    let mut skipped = 0;
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((out, 0)),
        Err(e) => return Err(io_error(format!("cannot read {}", dir.display()))(e)),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(CDXJ_EXT))
        .collect();
    files.sort();
    for path in files {
        let (lines, unreadable) = read_index_lines(&path)?;
        skipped += unreadable;
        out.extend(
            lines
                .iter()
                .filter_map(|(line, _)| record::parse_cdxj_line(line)),
        );
    }
    // Oldest first, so that a later record wins when folded into a map.
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((out, skipped))
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    fn page(body: &str) -> FetchedPage {
        FetchedPage {
            status: 200,
            content_type: Some("text/html".into()),
            http_version: "HTTP/1.1".into(),
            response_headers: vec![("content-type".into(), b"text/html".to_vec())],
            body: body.as_bytes().to_vec(),
            ..FetchedPage::default()
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn files_left_open_by_a_crash_are_cut_after_their_last_indexed_record() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let killed = WarcArchive::new(dir, "n1", 1 << 30, true);
        killed.write("http://a.test/1", &page("one")).unwrap();
        killed.write("http://a.test/2", &page("two")).unwrap();
        // The kill: a record half written, an index line cut, no close.
        let open: Vec<String> = names(dir);
        assert!(open.iter().all(|n| n.ends_with(".open")), "{open:?}");
        for name in &open {
            let mut f = OpenOptions::new()
                .append(true)
                .open(dir.join(name))
                .unwrap();
            f.write_all(b"\x1f\x8b\x08\x00torn").unwrap();
        }
        std::mem::forget(killed);
        // Another node's open file is not touched.
        fs::write(dir.join("web_crawler-1-00000-n2.warc.gz.open"), b"").unwrap();

        let next = WarcArchive::new(dir, "n1", 1 << 30, true);
        next.write("http://a.test/1", &page("one")).unwrap();
        next.close().unwrap();
        let all = names(dir);
        assert_eq!(
            all.iter().filter(|n| n.ends_with(".warc.gz")).count(),
            2,
            "{all:?}"
        );
        assert_eq!(
            all.iter().filter(|n| n.ends_with(".cdxj")).count(),
            2,
            "{all:?}"
        );
        assert!(all.contains(&"web_crawler-1-00000-n2.warc.gz.open".to_string()));

        let reader = ArchiveReader::open(dir).unwrap();
        assert_eq!(reader.len(), 2);
        assert_eq!(
            reader.page("http://a.test/2").unwrap().unwrap().body,
            b"two"
        );
        // The unchanged page became a revisit of the first one, so the
        // reader still finds the response.
        assert_eq!(
            reader.page("http://a.test/1").unwrap().unwrap().body,
            b"one"
        );
        let entries = read_indexes(dir).unwrap();
        assert!(
            entries.iter().any(|(_, e)| e.mime == "warc/revisit"),
            "{entries:?}"
        );
    }

    /// Found by the aimed kills (tests/it/kills.rs): a run killed after
    /// its last fetch, resumed by one with nothing left to fetch, left its
    /// file open, its tail unread by warcio.
    #[test]
    fn a_run_that_archives_nothing_still_closes_what_a_killed_run_left_open() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let killed = WarcArchive::new(dir, "n1", 1 << 30, true);
        killed.write("http://a.test/1", &page("one")).unwrap();
        let open = names(dir)
            .into_iter()
            .find(|n| n.ends_with(&format!("{WARC_EXT}{OPEN}")))
            .unwrap();
        let whole = fs::metadata(dir.join(&open)).unwrap().len();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join(&open))
            .unwrap();
        f.write_all(b"\x1f\x8b\x08\x00torn").unwrap();
        std::mem::forget(killed);

        let next = WarcArchive::new(dir, "n1", 1 << 30, true);
        next.resume().unwrap();
        next.close().unwrap();
        let all = names(dir);
        assert!(all.iter().all(|n| !n.ends_with(OPEN)), "{all:?}");
        assert_eq!(all.len(), 2, "the file and its index: {all:?}");
        let closed = open.strip_suffix(OPEN).unwrap();
        assert_eq!(
            fs::metadata(dir.join(closed)).unwrap().len(),
            whole,
            "the torn tail is cut"
        );
        let reader = ArchiveReader::open(dir).unwrap();
        assert_eq!(reader.len(), 1);
        assert_eq!(
            reader.page("http://a.test/1").unwrap().unwrap().body,
            b"one"
        );

        // A directory not made yet is left unmade.
        let absent = dir.join("not-yet");
        WarcArchive::new(&absent, "n1", 1 << 30, true)
            .resume()
            .unwrap();
        assert!(!absent.exists());
    }

    /// Found by the aimed kills: a kill between making a file and its
    /// index stopped every later run ("cannot remove NAME.cdxj.open"). Each
    /// state a kill in the middle of opening or closing a file leaves is
    /// finished by the next run: no file left open, every record whole
    /// still read.
    #[test]
    fn a_kill_while_a_file_opens_or_closes_is_finished_by_the_next_run() {
        /// What `finish` writes first: the sorted index.
        fn sort_index(d: &Path, n: &str) {
            let mut lines: Vec<String> =
                index_lines(&d.join(format!("{}{CDXJ_EXT}{OPEN}", stem(n))))
                    .unwrap()
                    .into_iter()
                    .map(|(l, _)| l)
                    .collect();
            lines.sort();
            let cdxj = d.join(format!("{}{CDXJ_EXT}", stem(n)));
            fs::write(cdxj, lines.join("\n") + "\n").unwrap();
        }
        fn close(d: &Path, n: &str) {
            fs::rename(d.join(format!("{n}{OPEN}")), d.join(n)).unwrap();
        }
        /// What a kill left (made in a directory from the name of its
        /// file in progress), and the records the next run reads.
        type State = (&'static str, fn(&Path, &str), usize);
        let states: [State; 5] = [
            (
                "the file made, its index not yet",
                |d, n| {
                    fs::remove_file(d.join(format!("{}{CDXJ_EXT}{OPEN}", stem(n)))).unwrap();
                    File::create(d.join(format!("{n}{OPEN}"))).unwrap();
                },
                0,
            ),
            ("the index sorted, the file not renamed", sort_index, 2),
            (
                "the file renamed, the open index not removed",
                |d, n| {
                    sort_index(d, n);
                    close(d, n);
                },
                2,
            ),
            ("the file renamed before its index was written", close, 2),
            (
                "an empty file removed, its index not yet",
                |d, n| fs::remove_file(d.join(format!("{n}{OPEN}"))).unwrap(),
                0,
            ),
        ];
        for (state, leave, records) in states {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            let killed = WarcArchive::new(dir, "n1", 1 << 30, true);
            killed.write("http://a.test/1", &page("one")).unwrap();
            killed.write("http://a.test/2", &page("two")).unwrap();
            std::mem::forget(killed);
            let name = names(dir)
                .into_iter()
                .find_map(|n| {
                    n.strip_suffix(OPEN)
                        .filter(|n| n.ends_with(WARC_EXT))
                        .map(str::to_string)
                })
                .unwrap();
            leave(dir, &name);

            let next = WarcArchive::new(dir, "n1", 1 << 30, true);
            next.resume().unwrap_or_else(|e| panic!("{state}: {e}"));
            let all = names(dir);
            assert!(all.iter().all(|n| !n.ends_with(OPEN)), "{state}: {all:?}");
            assert!(all.iter().all(|n| !n.ends_with(".tmp")), "{state}: {all:?}");
            let reader = ArchiveReader::open(dir).unwrap();
            assert_eq!(reader.len(), records, "{state}: {all:?}");
            if records > 0 {
                assert_eq!(
                    reader.page("http://a.test/2").unwrap().unwrap().body,
                    b"two",
                    "{state}"
                );
            }
        }
    }

    #[test]
    fn header_fields_are_spelled_as_the_specification_spells_them() {
        let tmp = tempfile::tempdir().unwrap();
        let archive = WarcArchive::new(tmp.path(), "n1", 1 << 30, true);
        archive.write("http://a.test/1", &page("one")).unwrap();
        archive.close().unwrap();
        let file = names(tmp.path())
            .into_iter()
            .find(|n| n.ends_with(WARC_EXT))
            .unwrap();
        let mut raw = String::new();
        io::Read::read_to_string(
            &mut flate2::read::MultiGzDecoder::new(File::open(tmp.path().join(file)).unwrap()),
            &mut raw,
        )
        .unwrap();
        let records: Vec<&str> = raw.split("WARC/1.1\r\n").skip(1).collect();
        assert_eq!(records.len(), 3, "warcinfo, request, response: {raw}");
        let fields = |record: &str| -> Vec<String> {
            let head = record.split("\r\n\r\n").next().unwrap();
            head.lines()
                .map(|l| l.split(": ").next().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            fields(records[1]),
            [
                "WARC-Type",
                "WARC-Record-ID",
                "WARC-Date",
                "WARC-Target-URI",
                "WARC-Warcinfo-ID",
                "WARC-Concurrent-To",
                "Content-Type",
                "WARC-Block-Digest",
                "Content-Length",
            ]
        );
        assert!(records[1].starts_with("WARC-Type: request\r\n"), "{raw}");
        assert!(records[2].starts_with("WARC-Type: response\r\n"), "{raw}");
        assert!(fields(records[2]).contains(&"WARC-Payload-Digest".to_string()));
        assert!(fields(records[0]).contains(&"WARC-Filename".to_string()));
        assert!(!raw.contains("warc-type"), "no lower-case names: {raw}");
    }

    #[test]
    fn spec_names_read_back_as_the_same_fields() {
        use WarcHeader::*;
        for name in [
            ContentLength,
            ContentType,
            BlockDigest,
            ConcurrentTo,
            Date,
            Filename,
            IdentifiedPayloadType,
            IPAddress,
            PayloadDigest,
            Profile,
            RecordID,
            RefersTo,
            SegmentNumber,
            SegmentOriginID,
            SegmentTotalLength,
            TargetURI,
            Truncated,
            WarcType,
            WarcInfoID,
        ] {
            assert_eq!(WarcHeader::from(spec_name(&name)), name);
            assert!(spec_name(&name).eq_ignore_ascii_case(&name.to_string()));
        }
    }

    #[test]
    fn a_full_file_is_closed_and_the_next_begun() {
        let tmp = tempfile::tempdir().unwrap();
        let archive = WarcArchive::new(tmp.path(), "n1", 1, true);
        archive.write("http://a.test/1", &page("one")).unwrap();
        archive.write("http://a.test/2", &page("two")).unwrap();
        let all = names(tmp.path());
        assert_eq!(all.len(), 4, "two closed files and their indexes: {all:?}");
        assert!(all.iter().all(|n| !n.ends_with(".open")));
    }
}
