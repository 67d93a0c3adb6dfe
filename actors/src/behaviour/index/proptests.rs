//! Property tests of a queued page's packed form (postcard, lz4): any page
//! packs and reads back equal; any bytes, a cut or a damaged packed page is
//! an error, never a panic or an allocation of what the bytes claim.

use super::*;
use crate::proptest_cases::config;
use proptest::prelude::*;

fn page_text() -> impl Strategy<Value = PageText> {
    (
        "\\PC{0,40}",
        prop::collection::vec("\\PC{0,20}", 0..4),
        prop_oneof![
            "\\PC{0,400}",
            // Repetitive text: what lz4 compresses most.
            ("\\PC{1,4}", 0usize..2000).prop_map(|(unit, n)| unit.repeat(n)),
        ],
        prop::collection::vec(
            ("\\PC{0,30}", "\\PC{0,20}").prop_map(|(target, text)| Anchor { target, text }),
            0..4,
        ),
        any::<u32>(),
        prop::collection::vec(
            (any::<u32>(), 0u8..5, "\\PC{0,20}", "\\PC{0,10}").prop_map(
                |(offset, level, heading, anchor)| SectionStart {
                    offset,
                    level,
                    heading,
                    anchor,
                },
            ),
            0..4,
        ),
    )
        .prop_map(
            |(title, headings, body, anchors, links_found, sections)| PageText {
                url: String::new(),
                title,
                headings,
                body,
                anchors,
                links_found,
                sections,
            },
        )
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn any_page_packs_and_reads_back_equal(page in page_text(), url in "\\PC{1,40}") {
        let queued = QueuedPage { url: url.clone(), packed: pack_bytes(&page) };
        let read = queued.text().map_err(TestCaseError::fail)?;
        prop_assert_eq!(read, PageText { url, ..page });
    }

    #[test]
    fn damaged_packed_pages_are_errors_not_panics(
        page in page_text(),
        cut in any::<usize>(),
        flips in prop::collection::vec((any::<usize>(), 1..=255u8), 0..3),
        claim in prop::option::of(any::<u32>()),
    ) {
        let mut packed = pack_bytes(&page);
        let len = packed.len();
        for (at, mask) in flips {
            packed[at % len] ^= mask;
        }
        if let Some(claim) = claim {
            packed[..4].copy_from_slice(&claim.to_le_bytes());
        }
        packed.truncate(cut % (len + 1));
        // A damaged page may still read (a flipped letter of its text):
        // what is asked is no panic.
        let _ = QueuedPage { url: "http://h/".into(), packed }.text();
    }

    #[test]
    fn a_packed_page_cut_short_is_an_error(page in page_text(), cut in any::<usize>()) {
        let packed = pack_bytes(&page);
        let short = packed[..cut % packed.len()].to_vec();
        let read = QueuedPage { url: "http://h/".into(), packed: short }.text();
        prop_assert!(read.is_err(), "{:?}", read);
    }

    #[test]
    fn any_bytes_are_an_error_or_a_page(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = QueuedPage { url: "http://h/".into(), packed: bytes }.text();
    }
}

/// Found by reading the packed form's decoder for these properties: the
/// four bytes before an lz4 block say how much to allocate, and a damaged
/// page claiming 4 GB had it allocated before the block was read.
#[test]
fn a_packed_page_claiming_more_than_lz4_can_make_is_refused_before_allocating() {
    let mut packed = pack_bytes(&PageText {
        body: "text".into(),
        ..PageText::default()
    });
    packed[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = QueuedPage {
        url: "http://h/".into(),
        packed,
    }
    .text()
    .unwrap_err();
    assert!(err.contains("damaged"), "{err}");
}
