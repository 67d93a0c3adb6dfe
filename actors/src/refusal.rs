//! Why a request was refused, as a program reads it: a stable
//! [`RefusalCode`] beside a sentence for people (as gRPC's status codes,
//! RFC 9457's problem `type`, or a Kubernetes `Status` reason). The
//! sentence may change from one version to the next; the code does not.
//! The same code travels the cluster wire, the console's `--json`, the
//! Rust API ([`ControlError::code`](crate::ControlError::code)) and the
//! HTTP API (which picks its status from it).

use serde::{Deserialize, Serialize};

/// A refusal's stable code, `snake_case` on every wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RefusalCode {
    /// The request itself cannot be read: malformed or truncated JSON,
    /// unknown fields, a missing parameter, text that is not UTF-8.
    BadRequest,
    /// Not a URL the crawl can take (no scheme, no host, not http(s), too long).
    InvalidUrl,
    /// A URL outside the crawl's scope (`--scope`).
    OutOfScope,
    /// A URL a user filter excludes (`--deny`, `--allow`).
    Filtered,
    /// A URL the trap defence refuses (a URL pattern it closed, a repeated
    /// path, a query explosion).
    Trap,
    /// Deeper than `--max-depth`.
    TooDeep,
    /// Processed already (with this operation) and not due again: nothing
    /// queued; ask again with `again` to fetch it again.
    AlreadyKnown,
    /// The crawl's page budget (`--max-pages`) is spent: nothing more is
    /// fetched, so nothing is queued.
    OverBudget,
    /// An unknown operation, or wrong arguments for one.
    BadOperation,
    /// A watch interval asked of a node that checks nothing again, or
    /// shorter than the shortest one.
    BadInterval,
    /// No such node, actor, trap family, page or path.
    NotFound,
    /// The request asks the master's node to do what only another may
    /// (stop itself as a worker would).
    Conflict,
    /// The node keeps no full-text index.
    NoIndex,
    /// The request is over the size a request may have.
    TooLarge,
    /// The answer would be over the size a reply may have: ask for fewer.
    ReplyTooLarge,
    /// A write without the right bearer token (HTTP).
    Unauthorized,
    /// The client was too slow sending its request (HTTP).
    Timeout,
    /// More requests at once than the node takes (HTTP): try again soon.
    TooManyRequests,
    /// The node cannot answer now (its master restarting, its store
    /// unreachable, an actor that did not answer): try again later.
    Unavailable,
    /// Anything else: a reply that cannot be read, a store that refuses
    /// for good.
    Internal,
    /// A code this version does not know (a newer node's).
    #[serde(other)]
    Other,
}

impl RefusalCode {
    /// The code as it is written on every wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::InvalidUrl => "invalid_url",
            Self::OutOfScope => "out_of_scope",
            Self::Filtered => "filtered",
            Self::Trap => "trap",
            Self::TooDeep => "too_deep",
            Self::AlreadyKnown => "already_known",
            Self::OverBudget => "over_budget",
            Self::BadOperation => "bad_operation",
            Self::BadInterval => "bad_interval",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::NoIndex => "no_index",
            Self::TooLarge => "too_large",
            Self::ReplyTooLarge => "reply_too_large",
            Self::Unauthorized => "unauthorized",
            Self::Timeout => "timeout",
            Self::TooManyRequests => "too_many_requests",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
            Self::Other => "other",
        }
    }

    /// A request refused with this code may succeed if sent again later,
    /// unchanged.
    pub fn retryable(self) -> bool {
        matches!(self, Self::TooManyRequests | Self::Unavailable)
    }
}

impl std::fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal as it crossed a wire: its code, and its sentence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub code: RefusalCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: RefusalCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_on_the_wire_and_unknown_ones_are_read_as_other() {
        for code in [
            RefusalCode::BadRequest,
            RefusalCode::InvalidUrl,
            RefusalCode::AlreadyKnown,
            RefusalCode::OverBudget,
            RefusalCode::TooManyRequests,
            RefusalCode::ReplyTooLarge,
        ] {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<RefusalCode>(&json).unwrap(), code);
        }
        let newer: RefusalCode = serde_json::from_str("\"quota_exceeded\"").unwrap();
        assert_eq!(newer, RefusalCode::Other);
        let r = Refusal::new(RefusalCode::InvalidUrl, "invalid URL \"x\"");
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"code":"invalid_url","message":"invalid URL \"x\""}"#
        );
        assert_eq!(r.to_string(), "invalid URL \"x\"");
        assert!(RefusalCode::Unavailable.retryable() && !RefusalCode::InvalidUrl.retryable());
    }
}
