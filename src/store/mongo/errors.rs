//! Driver errors as the crawler reports them: classified by what the master
//! does with them (wait out an outage, stop at once, fail), with their cause
//! in words and without a URI's password.

use mongodb::error::{ErrorKind, WriteFailure};
use web_crawler_actors::StoreError;

/// MongoDB duplicate-key error code: the only way a duplicate is recognised.
const DUPLICATE_KEY: i32 = 11000;

/// A driver error as the crawler reports it: classified by what the master
/// does with it ([`class_of`]), with its cause in words.
pub(super) fn backend(e: mongodb::error::Error) -> StoreError {
    let class = class_of(&e);
    let cause = DriverError::from(e);
    match class {
        Class::Transient => StoreError::unavailable("MongoDB is unavailable", cause),
        Class::Permanent => StoreError::refused("MongoDB refuses the crawl's writes", cause),
        Class::Other => StoreError::backend("MongoDB", cause),
    }
}

/// A driver error in words. The driver's own text is a debug dump (the
/// whole topology, `labels: {}`, write failures with `{:?}`); this says what
/// happened in one line, and keeps the error for the debug log (its
/// `Debug` form).
pub(super) struct DriverError {
    words: String,
    error: mongodb::error::Error,
}

impl From<mongodb::error::Error> for DriverError {
    fn from(error: mongodb::error::Error) -> Self {
        Self {
            words: describe(&error),
            error,
        }
    }
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.words)
    }
}

impl std::fmt::Debug for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverError")
            .field("words", &self.words)
            .field("error", &self.error)
            .finish()
    }
}

impl std::error::Error for DriverError {}

/// What the master does with a driver error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    /// Wait and ask again: no server answers, the connection broke, a
    /// replica set has no primary for the moment, a timeout.
    Transient,
    /// Stop: no wait mends it (refused credentials, a full disk).
    Permanent,
    /// Anything else: the master fails and is restarted.
    Other,
}

/// Labels the driver and servers put on errors worth retrying.
const TRANSIENT_LABELS: [&str; 4] = [
    "RetryableWriteError",
    "TransientTransactionError",
    "RetryableError",
    "SystemOverloadedError",
];

pub(super) fn class_of(e: &mongodb::error::Error) -> Class {
    match e.kind.as_ref() {
        ErrorKind::ServerSelection { .. }
        | ErrorKind::Io(_)
        | ErrorKind::ConnectionPoolCleared { .. }
        | ErrorKind::DnsResolve { .. } => return Class::Transient,
        ErrorKind::Authentication { .. } => return Class::Permanent,
        _ => {}
    }
    if TRANSIENT_LABELS.iter().any(|label| e.contains_label(label)) {
        return Class::Transient;
    }
    server_code(e).map_or(Class::Other, class_of_code)
}

/// The server's error code, if the server answered with an error.
fn server_code(e: &mongodb::error::Error) -> Option<i32> {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => Some(w.code),
        _ => None,
    }
}

/// Server error codes (MongoDB's `error_codes.yml`) by what they mean here.
fn class_of_code(code: i32) -> Class {
    match code {
        // HostUnreachable, HostNotFound, MaxTimeMSExpired, WriteConcernFailed
        // (a timeout), NetworkTimeout, ShutdownInProgress, WriteConflict,
        // FailedToSatisfyReadPreference, ReadConcernMajorityNotAvailableYet,
        // PrimarySteppedDown, ExceededTimeLimit, SocketException,
        // LegacyNotPrimary, NotWritablePrimary, InterruptedAtShutdown,
        // InterruptedDueToReplStateChange, NotPrimaryNoSecondaryOk,
        // NotPrimaryOrSecondary.
        6 | 7 | 50 | 64 | 89 | 91 | 112 | 133 | 134 | 189 | 262 | 9001 | 10058 | 10107 | 11600
        | 11602 | 13435 | 13436 => Class::Transient,
        // Unauthorized, AuthenticationFailed, DocumentValidationFailure (a
        // schema the crawl's documents do not fit), OutOfDiskSpace.
        13 | 18 | 121 | 14031 => Class::Permanent,
        _ => Class::Other,
    }
}

/// One line of words for a driver error.
pub(super) fn describe(e: &mongodb::error::Error) -> String {
    match e.kind.as_ref() {
        ErrorKind::ServerSelection { message, .. } => no_server(message),
        ErrorKind::Io(io) => format!("the connection to the server failed: {io}"),
        ErrorKind::ConnectionPoolCleared { .. } => {
            "the connection to the server was lost".to_string()
        }
        ErrorKind::Authentication { message, .. } => format!("authentication failed: {message}"),
        ErrorKind::DnsResolve { message, .. } => {
            format!("the server's name did not resolve: {message}")
        }
        ErrorKind::Command(c) => coded(&c.message, Some(&c.code_name), c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            coded(&w.message, w.code_name.as_deref(), w.code)
        }
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => {
            coded(&w.message, Some(&w.code_name), w.code)
        }
        other => {
            let text = other.to_string();
            let line = text.lines().next().unwrap_or_default();
            match line.char_indices().nth(200) {
                Some((cut, _)) => format!("{}…", &line[..cut]),
                None => line.to_string(),
            }
        }
    }
}

/// `message (CodeName, code N)`.
fn coded(message: &str, code_name: Option<&str>, code: i32) -> String {
    match code_name.filter(|n| !n.is_empty()) {
        Some(name) => format!("{message} ({name}, code {code})"),
        None => format!("{message} (code {code})"),
    }
}

/// `uri` with its password, if it has one, replaced by `***`: for messages.
pub(super) fn redacted(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((user_info, _)) if user_info.contains(':') => {
            let user = &user_info[..user_info.find(':').unwrap_or(0)];
            let at = rest[..authority_end].rfind('@').unwrap_or(0);
            format!("{scheme}://{user}:***{}", &rest[at..])
        }
        _ => uri.to_string(),
    }
}

/// A server selection timeout in words: the driver's message describes the
/// whole topology; what matters is which server was asked and why it did
/// not answer, when the message says (`Address: A, ... Error: Kind: WHY, labels`).
pub(super) fn no_server(message: &str) -> String {
    let after = |key: &str, end: &str| {
        let start = message.find(key)? + key.len();
        let rest = &message[start..];
        Some(
            rest[..rest.find(end).unwrap_or(rest.len())]
                .trim()
                .to_string(),
        )
    };
    let address = after("Address: ", ",");
    let why = after("Error: Kind: ", ", labels");
    match (address, why) {
        (Some(address), Some(why)) => {
            format!("no server answered in time ({address}: {why})")
        }
        (Some(address), None) => format!("no server answered in time ({address})"),
        _ => "no server answered in time".to_string(),
    }
}

pub(super) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

pub(super) fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code == DUPLICATE_KEY,
        ErrorKind::Command(c) => c.code == DUPLICATE_KEY,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::bson::doc;

    /// A driver error as the server sends it: a write error with this code.
    fn write_error(code: i32, name: &str, message: &str) -> mongodb::error::Error {
        let w: mongodb::error::WriteError = mongodb::bson::from_document(
            doc! { "code": code, "codeName": name, "errmsg": message },
        )
        .unwrap();
        mongodb::error::Error::from(ErrorKind::Write(WriteFailure::WriteError(w)))
    }

    fn command_error(code: i32, name: &str, message: &str) -> mongodb::error::Error {
        let c: mongodb::error::CommandError = mongodb::bson::from_document(
            doc! { "code": code, "codeName": name, "errmsg": message },
        )
        .unwrap();
        mongodb::error::Error::from(ErrorKind::Command(c))
    }

    #[test]
    fn unreachable_servers_and_elections_are_waited_for_a_full_disk_is_not() {
        let refused = mongodb::error::Error::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        ));
        let e = backend(refused);
        assert!(e.is_transient(), "{e:?}");
        assert_eq!(
            web_crawler_actors::error_chain(&e),
            "MongoDB is unavailable: the connection to the server failed: connection refused"
        );
        for (code, name) in [
            (10107, "NotWritablePrimary"),
            (11602, "InterruptedDueToReplStateChange"),
            (189, "PrimarySteppedDown"),
            (91, "ShutdownInProgress"),
            (89, "NetworkTimeout"),
        ] {
            assert!(
                backend(command_error(code, name, "x")).is_transient(),
                "{name}"
            );
        }
        let full = backend(write_error(
            14031,
            "OutOfDiskSpace",
            "No space left on device",
        ));
        assert!(full.is_permanent(), "{full:?}");
        assert_eq!(
            web_crawler_actors::error_chain(&full),
            "MongoDB refuses the crawl's writes: No space left on device (OutOfDiskSpace, \
             code 14031)"
        );
        assert!(backend(command_error(18, "AuthenticationFailed", "bad auth")).is_permanent());
        let other = backend(command_error(2, "BadValue", "unknown operator"));
        assert!(!other.is_transient() && !other.is_permanent());
        assert_eq!(
            web_crawler_actors::error_chain(&other),
            "MongoDB: unknown operator (BadValue, code 2)"
        );
    }

    #[test]
    fn a_server_selection_timeout_reads_as_which_server_and_why() {
        let driver = "Server selection timeout: No available servers. Topology: { Type: \
            Unknown, Set Name: , Max Set Version: , Max Election ID: , Servers: [ { Address: \
            127.0.0.1:40404, Type: Unknown, Error: Kind: I/O error: Connection refused (os \
            error 111), labels: {} } ], Compatibility Error:  }";
        assert_eq!(
            no_server(driver),
            "no server answered in time (127.0.0.1:40404: I/O error: Connection refused (os \
             error 111))"
        );
        assert_eq!(
            no_server("Server selection timeout"),
            "no server answered in time"
        );
    }

    #[test]
    fn a_uri_in_a_message_keeps_its_password_to_itself() {
        assert_eq!(
            redacted("mongodb://crawler:s3cret@db1:27017,db2/crawler?replicaSet=rs"),
            "mongodb://crawler:***@db1:27017,db2/crawler?replicaSet=rs"
        );
        assert_eq!(redacted("mongodb://db1:27017"), "mongodb://db1:27017");
        assert_eq!(redacted("mongodb://user@db1/"), "mongodb://user@db1/");
    }
}
