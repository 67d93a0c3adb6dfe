//! Property tests of the control plane's wire forms: a request is JSON text
//! from a console, a script or another node; an answer is JSON text back.
//! Any text decodes to a request or an error, never a panic; a request and
//! an answer read back as sent; one cut short is an error, never another
//! request or answer.

use super::*;
use crate::proptest_cases::config;
use crate::reply::{ControlError, ControlReply, from_wire, to_wire};
use proptest::prelude::*;

fn request() -> impl Strategy<Value = ControlRequest> {
    let text = || "\\PC{0,24}";
    prop_oneof![
        Just(ControlRequest::Status),
        Just(ControlRequest::Tree),
        text().prop_map(|actor| ControlRequest::State { actor }),
        (
            text(),
            prop::collection::vec(text(), 0..3),
            any::<bool>(),
            prop::option::of(any::<i64>())
        )
            .prop_map(|(url, op, again, every_ms)| ControlRequest::AddUrl {
                url,
                operation: OperationSpec(op),
                again,
                every_ms,
            }),
        (prop::collection::vec(text(), 0..5), any::<bool>()).prop_map(|(urls, again)| {
            ControlRequest::AddUrls {
                urls,
                operation: OperationSpec::crawl(),
                again,
            }
        }),
        any::<usize>().prop_map(|limit| ControlRequest::Pending { limit }),
        (text(), any::<usize>(), any::<usize>()).prop_map(|(query, limit, offset)| {
            ControlRequest::Search {
                query,
                limit,
                offset,
            }
        }),
        (text(), any::<bool>())
            .prop_map(|(host, paused)| ControlRequest::PauseHost { host, paused }),
        (prop::option::of(text()), any::<usize>())
            .prop_map(|(host, limit)| ControlRequest::Availability { host, limit }),
        text().prop_map(|family| ControlRequest::ReopenTrap { family }),
    ]
}

/// JSON-shaped text: the request's own keys and values in any order and
/// nesting, with quotes and escapes that may or may not close.
fn json_like() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("{".to_string()),
            Just("}".to_string()),
            Just("[".to_string()),
            Just("]".to_string()),
            Just(",".to_string()),
            Just(":".to_string()),
            Just("\"cmd\"".to_string()),
            Just("\"add_url\"".to_string()),
            Just("\"search\"".to_string()),
            Just("\"limit\"".to_string()),
            Just("\"url\"".to_string()),
            Just("\"operation\"".to_string()),
            Just("\"\\ud800\"".to_string()),
            Just("\"\\u0000\"".to_string()),
            Just("1e999".to_string()),
            Just("-1".to_string()),
            Just("18446744073709551616".to_string()),
            Just("null".to_string()),
            "\"\\PC{0,8}\"",
            "\\PC{0,4}",
        ],
        0..30,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn any_text_is_a_request_or_an_error(text in prop_oneof![any::<String>(), json_like()]) {
        if let Ok(request) = serde_json::from_str::<ControlRequest>(&text) {
            let _ = request.max_bytes();
            let again = serde_json::to_string(&request).unwrap();
            prop_assert_eq!(serde_json::from_str::<ControlRequest>(&again).ok(), Some(request));
        }
    }

    #[test]
    fn a_request_reads_back_as_sent_and_a_cut_one_is_an_error(
        request in request(),
        cut in any::<usize>(),
    ) {
        let text = serde_json::to_string(&request).unwrap();
        let read: ControlRequest = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&read, &request);
        // A JSON object cut anywhere is no longer one.
        let mut at = cut % text.len();
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        prop_assert!(serde_json::from_str::<ControlRequest>(&text[..at]).is_err(), "{}", &text[..at]);
    }

    #[test]
    fn an_answer_reads_back_as_sent_and_a_cut_one_is_an_error(
        queued in "\\PC{0,40}",
        refused in any::<bool>(),
        cut in any::<usize>(),
        garbage in prop_oneof![any::<String>(), json_like()],
    ) {
        let _ = from_wire(&garbage);
        let answer = if refused {
            Err(ControlError::MasterRestarting)
        } else {
            Ok(ControlReply::Queued(Queued { url: queued.clone(), already_queued: false }))
        };
        let text = to_wire(&answer);
        match from_wire(&text) {
            Ok(value) => prop_assert_eq!(value, serde_json::json!({"url": queued, "already_queued": false})),
            Err(ControlError::Refused(r)) => prop_assert!(refused, "{:?}", r),
            Err(e) => prop_assert!(false, "{:?}", e),
        }
        let mut at = cut % text.len();
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        prop_assert!(
            matches!(from_wire(&text[..at]), Err(ControlError::BadReply(_))),
            "{}", &text[..at]
        );
    }
}
