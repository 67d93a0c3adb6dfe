//! Property tests of the archive read back: WARC files cut short or with
//! bytes flipped, CDXJ indexes with lines cut, garbled or lying about
//! offsets and lengths. Nothing panics; a page read back is the page
//! written; an index line that cannot be read is skipped and counted.

use super::*;
use crate::proptest_cases::config;
use proptest::prelude::*;
use std::io::Write;

fn page(status: u16, body: Vec<u8>) -> FetchedPage {
    FetchedPage {
        status,
        content_type: Some("text/html; charset=utf-8".into()),
        http_version: "HTTP/1.1".into(),
        response_headers: vec![("content-type".into(), b"text/html".to_vec())],
        body,
        ..FetchedPage::default()
    }
}

/// Pages to archive: distinct URLs, bodies of any bytes.
fn pages() -> impl Strategy<Value = Vec<(String, FetchedPage)>> {
    prop::collection::vec(
        (
            prop::sample::select(vec![200u16, 404, 500, 301]),
            prop::collection::vec(any::<u8>(), 0..600),
        ),
        1..6,
    )
    .prop_map(|pages| {
        pages
            .into_iter()
            .enumerate()
            .map(|(i, (status, body))| (format!("http://a.test/p{i}?q=\u{e9}"), page(status, body)))
            .collect()
    })
}

/// A position among `n`, drawn without knowing `n`.
#[derive(Debug, Clone, Copy)]
struct Pick(usize);

impl Pick {
    fn index(self, n: usize) -> usize {
        self.0 % n.max(1)
    }
}

/// What is done to the closed files.
#[derive(Debug, Clone)]
enum Damage {
    /// The WARC file cut at this fraction of its length.
    CutWarc(Pick),
    /// Bytes of the WARC file flipped.
    FlipWarc(Vec<(Pick, u8)>),
    /// The index cut at this fraction of its length.
    CutIndex(Pick),
    /// Lines that are no index line inserted into the index.
    GarbageLines(Vec<(Pick, Vec<u8>)>),
    /// An index line's offset, length or file name replaced.
    Lie(Pick, Lie),
}

#[derive(Debug, Clone)]
enum Lie {
    Length(String),
    Offset(String),
    Filename(String),
}

fn damage() -> impl Strategy<Value = Damage> {
    let lie = prop_oneof![
        prop_oneof![
            Just("18446744073709551615".to_string()),
            Just("4294967296".to_string()),
            Just("0".to_string()),
            "[0-9]{1,6}",
            "\\PC{0,4}",
        ]
        .prop_map(Lie::Length),
        prop_oneof![Just("18446744073709551615".to_string()), "[0-9]{1,6}"].prop_map(Lie::Offset),
        prop_oneof![
            Just("../../etc/passwd".to_string()),
            Just("/dev/zero".to_string()),
            Just("".to_string()),
            Just(".".to_string()),
        ]
        .prop_map(Lie::Filename),
    ];
    prop_oneof![
        any::<usize>().prop_map(Pick).prop_map(Damage::CutWarc),
        prop::collection::vec((any::<usize>().prop_map(Pick), 1..=255u8), 1..4)
            .prop_map(Damage::FlipWarc),
        any::<usize>().prop_map(Pick).prop_map(Damage::CutIndex),
        prop::collection::vec(
            (
                any::<usize>().prop_map(Pick),
                prop_oneof![
                    prop::collection::vec(
                        any::<u8>().prop_filter("one line", |b| *b != b'\n'),
                        1..80
                    ),
                    Just(b"a,test)/p0 20240101000000 {\"url\": 1}".to_vec()),
                    Just(b"a,test)/p0 20240101000000".to_vec()),
                    Just(b"\xff\xfe".to_vec()),
                ]
            ),
            1..4
        )
        .prop_map(Damage::GarbageLines),
        (any::<usize>().prop_map(Pick), lie).prop_map(|(i, l)| Damage::Lie(i, l)),
    ]
}

fn only_file(dir: &Path, ext: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

/// Does `damage` to the closed files in `dir`; how many index lines it
/// made unreadable, when that is known exactly.
fn apply(dir: &Path, damage: &Damage) -> Option<usize> {
    let warc = only_file(dir, WARC_EXT);
    let cdxj = only_file(dir, CDXJ_EXT);
    match damage {
        Damage::CutWarc(at) => {
            let len = fs::metadata(&warc).unwrap().len() as usize;
            File::options()
                .write(true)
                .open(&warc)
                .unwrap()
                .set_len(at.index(len + 1) as u64)
                .unwrap();
            Some(0)
        }
        Damage::FlipWarc(flips) => {
            let mut bytes = fs::read(&warc).unwrap();
            let len = bytes.len();
            for (at, mask) in flips {
                bytes[at.index(len)] ^= mask;
            }
            fs::write(&warc, bytes).unwrap();
            Some(0)
        }
        Damage::CutIndex(at) => {
            let bytes = fs::read(&cdxj).unwrap();
            fs::write(&cdxj, &bytes[..at.index(bytes.len() + 1)]).unwrap();
            None
        }
        Damage::GarbageLines(lines) => {
            let text = fs::read(&cdxj).unwrap();
            let mut all: Vec<Vec<u8>> = text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            for (at, line) in lines {
                all.insert(at.index(all.len() + 1), line.clone());
            }
            let mut out = File::create(&cdxj).unwrap();
            out.write_all(&all.join(&b'\n')).unwrap();
            Some(
                lines
                    .iter()
                    // Blank as the reader reads a line: `str::trim`, so a
                    // vertical tab alone is blank too.
                    .filter(|(_, l)| !std::str::from_utf8(l).is_ok_and(|l| l.trim().is_empty()))
                    .count(),
            )
        }
        Damage::Lie(at, lie) => {
            let text = fs::read_to_string(&cdxj).unwrap();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            let i = at.index(lines.len());
            let (timestamp, mut entry) = record::parse_cdxj_line(&lines[i]).unwrap();
            match lie {
                Lie::Length(v) => entry.length.clone_from(v),
                Lie::Offset(v) => entry.offset.clone_from(v),
                Lie::Filename(v) => entry.filename.clone_from(v),
            }
            let url = url::Url::parse(&entry.url).unwrap();
            lines[i] = record::cdxj_line(&url, &timestamp, &entry);
            fs::write(&cdxj, lines.join("\n") + "\n").unwrap();
            Some(0)
        }
    }
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn damaged_archives_read_back_without_a_panic_and_never_a_wrong_page(
        pages in pages(),
        damage in damage(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let archive = WarcArchive::new(tmp.path(), "n1", 1 << 30, true);
        for (url, page) in &pages {
            archive.write(url, page).unwrap();
        }
        archive.close().unwrap();
        let unreadable = apply(tmp.path(), &damage);
        let reader = ArchiveReader::open(tmp.path()).unwrap();
        if let Some(unreadable) = unreadable {
            prop_assert_eq!(reader.skipped(), unreadable);
        }
        for (url, written) in &pages {
            match reader.page(url) {
                Ok(Some(read)) => {
                    prop_assert_eq!(&read.body, &written.body, "{}", url);
                    prop_assert_eq!(read.status, written.status);
                }
                Ok(None) | Err(WarcError::Damaged { .. }) => {}
                Err(e) => prop_assert!(false, "{} gave {:?}", url, e),
            }
        }
        if matches!(damage, Damage::GarbageLines(_)) {
            // Garbage beside the lines does not cost a page.
            for (url, written) in &pages {
                let read = reader.page(url).unwrap().unwrap();
                prop_assert_eq!(&read.body, &written.body);
            }
        }
    }

    #[test]
    fn any_text_as_a_cdxj_line_never_panics_and_written_lines_read_back(
        line in "\\PC{0,120}",
        entry in prop::collection::vec("\\PC{0,12}", 7),
        timestamp in "[0-9]{14}",
        path in "[a-z/]{0,12}",
    ) {
        let _ = record::parse_cdxj_line(&line);
        let url = url::Url::parse(&format!("http://a.test/{path}")).unwrap();
        let entry = record::CdxEntry {
            url: entry[0].clone(),
            mime: entry[1].clone(),
            status: entry[2].clone(),
            digest: entry[3].clone(),
            length: entry[4].clone(),
            offset: entry[5].clone(),
            filename: entry[6].clone(),
        };
        let written = record::cdxj_line(&url, &timestamp, &entry);
        prop_assert!(!written.contains('\n'));
        prop_assert_eq!(record::parse_cdxj_line(&written), Some((timestamp, entry)));
    }
}

/// A closed archive holding one page, `http://a.test/1` ("one").
fn one_page_archive() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let archive = WarcArchive::new(tmp.path(), "n1", 1 << 30, true);
    archive
        .write("http://a.test/1", &page(200, b"one".to_vec()))
        .unwrap();
    archive.close().unwrap();
    tmp
}

/// Found by `damaged_archives_read_back_without_a_panic_and_never_a_wrong_page`:
/// an index line's length was allocated before it was checked (a length of
/// 2^64-1 panicked, one past the file's end was an I/O error rather than a
/// damaged record), and its file name was joined to the directory as it
/// was (`../`, `/dev/zero`).
#[test]
fn an_index_line_lying_about_its_record_is_a_damaged_record() {
    for lie in [
        Lie::Length("18446744073709551615".into()),
        Lie::Length("4294967296".into()),
        Lie::Offset("18446744073709551615".into()),
        Lie::Filename("../../etc/passwd".into()),
        Lie::Filename("/dev/zero".into()),
    ] {
        let tmp = one_page_archive();
        apply(tmp.path(), &Damage::Lie(Pick(0), lie.clone()));
        let reader = ArchiveReader::open(tmp.path()).unwrap();
        let read = reader.page("http://a.test/1");
        assert!(
            matches!(read, Err(WarcError::Damaged { .. })),
            "{lie:?}: {read:?}"
        );
    }
}

#[test]
fn unreadable_index_lines_are_skipped_and_counted() {
    let tmp = one_page_archive();
    let lines = vec![
        (Pick(0), b"\xff\xfe".to_vec()),
        (Pick(0), b"a,test)/ 2024 {\"url\": 1".to_vec()),
    ];
    apply(tmp.path(), &Damage::GarbageLines(lines));
    let reader = ArchiveReader::open(tmp.path()).unwrap();
    assert_eq!(reader.skipped(), 2);
    assert_eq!(
        reader.page("http://a.test/1").unwrap().unwrap().body,
        b"one"
    );
}

/// Every record of every closed WARC file in `dir`, read from the start
/// to the end (gzip members one after another): the file is whole when
/// this is `Ok`.
fn read_whole(dir: &Path) -> Result<usize, String> {
    let mut records = 0;
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(WARC_EXT) {
            continue;
        }
        let file = File::open(&path).unwrap();
        let reader = warc::WarcReader::new(BufReader::new(flate2::read::MultiGzDecoder::new(file)));
        for record in reader.iter_records() {
            record.map_err(|e| format!("{}: {e}", path.display()))?;
            records += 1;
        }
    }
    Ok(records)
}

/// How a kill (or a power cut) leaves the open files of the last run.
#[derive(Debug, Clone)]
enum Torn {
    /// SIGKILL while the last page's records were written: the WARC file
    /// cut inside them, their index line never written.
    InLastRecord(Pick),
    /// SIGKILL between the records and their index line.
    BeforeIndexLine,
    /// SIGKILL while the index line was written: cut inside it.
    InIndexLine(Pick),
    /// A power cut: the page cache kept the index and lost the WARC
    /// file's tail, anywhere.
    WarcTailLost(Pick),
}

fn torn() -> impl Strategy<Value = Torn> {
    prop_oneof![
        any::<usize>().prop_map(|n| Torn::InLastRecord(Pick(n))),
        Just(Torn::BeforeIndexLine),
        any::<usize>().prop_map(|n| Torn::InIndexLine(Pick(n))),
        any::<usize>().prop_map(|n| Torn::WarcTailLost(Pick(n))),
    ]
}

proptest! {
    #![proptest_config(config(300))]

    /// Part of issue 47's aimed kills, at the writer's own files: a run
    /// killed in any byte of a record or its index line leaves open files
    /// that the next run closes whole: warc reads every record of every
    /// file, and every page whose records were whole before the kill
    /// reads back as written.
    #[test]
    fn files_torn_by_a_kill_are_closed_whole_by_the_next_run(
        pages in pages(),
        torn in torn(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let killed = WarcArchive::new(dir, "n1", 1 << 30, true);
        let mut ends = Vec::new();
        for (url, page) in &pages {
            killed.write(url, page).unwrap();
            let warc = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path())
                .find(|p| p.to_string_lossy().ends_with(".warc.gz.open")).unwrap();
            ends.push(fs::metadata(&warc).unwrap().len());
        }
        std::mem::forget(killed);
        let open = |ext: &str| fs::read_dir(dir).unwrap().map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(ext)).unwrap();
        let (warc, cdxj) = (open(".warc.gz.open"), open(".cdxj.open"));
        let warc_len = fs::metadata(&warc).unwrap().len();
        let index = fs::read(&cdxj).unwrap();
        let without_last_line = |index: &[u8]| {
            let body = &index[..index.len() - 1];
            body[..body.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1)].to_vec()
        };
        let before_last = if pages.len() > 1 { ends[pages.len() - 2] } else { 0 };
        // The WARC file's length after the kill.
        let kept = match &torn {
            Torn::InLastRecord(at) => {
                fs::write(&cdxj, without_last_line(&index)).unwrap();
                before_last + at.index((warc_len - before_last) as usize) as u64
            }
            Torn::BeforeIndexLine => {
                fs::write(&cdxj, without_last_line(&index)).unwrap();
                warc_len
            }
            Torn::InIndexLine(at) => {
                let whole = without_last_line(&index);
                let cut = whole.len() + at.index(index.len() - whole.len() - 1);
                fs::write(&cdxj, &index[..cut]).unwrap();
                warc_len
            }
            Torn::WarcTailLost(at) => at.index(warc_len as usize + 1) as u64,
        };
        File::options().write(true).open(&warc).unwrap().set_len(kept).unwrap();
        let indexed = |i: usize| match &torn {
            Torn::WarcTailLost(_) => ends[i] <= kept,
            _ => i + 1 < pages.len(),
        };

        let next = WarcArchive::new(dir, "n1", 1 << 30, true);
        next.write("http://a.test/after", &page(200, b"after".to_vec())).unwrap();
        next.close().unwrap();
        let records = read_whole(dir).map_err(TestCaseError::fail)?;
        let reader = ArchiveReader::open(dir).unwrap();
        prop_assert_eq!(reader.skipped(), 0);
        for (i, (url, written)) in pages.iter().enumerate() {
            let read = reader.page(url).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if indexed(i) {
                prop_assert_eq!(read.map(|p| p.body), Some(written.body.clone()), "{}", url);
            } else {
                prop_assert!(read.is_none(), "{} was cut off", url);
            }
        }
        let after = reader.page("http://a.test/after").unwrap().unwrap();
        prop_assert_eq!(after.body, b"after".to_vec());
        // A warcinfo record a file, and a request and a response a page.
        let pages_kept = (0..pages.len()).filter(|&i| indexed(i)).count();
        let files = usize::from(pages_kept > 0) + 1;
        prop_assert_eq!(records, files + 2 * (pages_kept + 1));
    }
}

/// Found by `files_torn_by_a_kill_are_closed_whole_by_the_next_run`: after
/// a power cut that kept an index line and lost the end of its record, the
/// next run cut the WARC file to that line's end, past the file's: the
/// file grew zeros at its end and no reader could read it whole.
#[test]
fn an_index_line_past_a_torn_file_is_dropped_not_cut_to() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let killed = WarcArchive::new(dir, "n1", 1 << 30, true);
    killed
        .write("http://a.test/1", &page(200, b"one".to_vec()))
        .unwrap();
    let warc = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".warc.gz.open"))
        .unwrap();
    let whole = fs::metadata(&warc).unwrap().len();
    killed
        .write("http://a.test/2", &page(200, b"two".to_vec()))
        .unwrap();
    std::mem::forget(killed);
    // The second page's records lost, its index line kept.
    File::options()
        .write(true)
        .open(&warc)
        .unwrap()
        .set_len(whole + 10)
        .unwrap();
    let next = WarcArchive::new(dir, "n1", 1 << 30, true);
    next.write("http://a.test/3", &page(200, b"three".to_vec()))
        .unwrap();
    next.close().unwrap();
    assert_eq!(read_whole(dir), Ok(2 + 2 * 2));
    let reader = ArchiveReader::open(dir).unwrap();
    assert_eq!(
        reader.page("http://a.test/1").unwrap().unwrap().body,
        b"one"
    );
    assert!(reader.page("http://a.test/2").unwrap().is_none());
}
