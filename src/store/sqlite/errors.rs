//! The store's internal error, [`Fail`], and what it means to the master
//! once mapped to a [`StoreError`].

use rusqlite::ErrorCode;
use web_crawler_actors::StoreError;

/// Internal error, so `?` works on rusqlite calls; mapped to [`StoreError`] at
/// the trait boundary.
#[derive(Debug, thiserror::Error)]
pub(super) enum Fail {
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    #[error("{0}")]
    Corrupt(String),
    #[error("{0}")]
    Invalid(String),
}

impl From<Fail> for StoreError {
    fn from(fail: Fail) -> Self {
        match fail {
            Fail::Sql(e) if is_unreadable(&e) => StoreError::Corrupt(e.to_string()),
            Fail::Sql(e) => classify(e),
            Fail::Corrupt(msg) => StoreError::Corrupt(msg),
            Fail::Invalid(msg) => StoreError::Invalid(msg),
        }
    }
}

/// What the master does with a SQLite error: wait out a lock another
/// connection holds (a user's `sqlite3` writing, past the busy timeout),
/// stop at once on a full disk, a read-only or unwritable file or a failing
/// disk, and fail on anything else.
fn classify(e: rusqlite::Error) -> StoreError {
    let Some(code) = ffi_error(&e).map(|err| err.code) else {
        return StoreError::backend("SQLite", e);
    };
    let e = SqliteError(e);
    match code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => StoreError::unavailable(
            "the store file is locked by another connection (a sqlite3 session writing?)",
            e,
        ),
        ErrorCode::DiskFull => StoreError::refused(
            "the store is full: no space is left on its disk, or the file is at its size limit",
            e,
        ),
        ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen => {
            StoreError::refused("the store file cannot be written", e)
        }
        ErrorCode::SystemIoFailure => {
            StoreError::refused("the disk of the store failed a read or a write", e)
        }
        _ => StoreError::backend("SQLite", e),
    }
}

/// A SQLite error as people read it: SQLite's message, without the error
/// code's generic text that rusqlite gives as its source (`database is
/// locked: Error code 5: The database file is locked`). The debug form has
/// everything.
#[derive(Debug)]
struct SqliteError(rusqlite::Error);

impl std::fmt::Display for SqliteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SqliteError {}

/// SQLite's own error code, also for errors rusqlite reports with the SQL text.
pub(super) fn ffi_error(e: &rusqlite::Error) -> Option<&rusqlite::ffi::Error> {
    match e {
        rusqlite::Error::SqliteFailure(err, _)
        | rusqlite::Error::SqlInputError { error: err, .. } => Some(err),
        _ => None,
    }
}

/// Errors that mean the data on disk, not the operation, is wrong.
pub(super) fn is_unreadable(e: &rusqlite::Error) -> bool {
    matches!(
        ffi_error(e).map(|err| err.code),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
    ) || matches!(
        e,
        rusqlite::Error::IntegralValueOutOfRange(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use web_crawler_actors::error_chain;

    fn sqlite_error(code: std::ffi::c_int, msg: &str) -> Fail {
        Fail::Sql(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            Some(msg.to_string()),
        ))
    }

    #[test]
    fn a_lock_is_waited_for_a_full_disk_is_not_and_the_rest_is_a_failure() {
        use rusqlite::ffi;
        for code in [
            ffi::SQLITE_BUSY,
            ffi::SQLITE_LOCKED,
            ffi::SQLITE_BUSY_SNAPSHOT,
        ] {
            let e = StoreError::from(sqlite_error(code, "database is locked"));
            assert!(e.is_transient() && !e.is_permanent(), "{code}: {e:?}");
            assert_eq!(
                error_chain(&e),
                "the store file is locked by another connection (a sqlite3 session \
                 writing?): database is locked"
            );
        }
        for code in [
            ffi::SQLITE_FULL,
            ffi::SQLITE_READONLY,
            ffi::SQLITE_IOERR_WRITE,
            ffi::SQLITE_CANTOPEN,
            ffi::SQLITE_CORRUPT,
            ffi::SQLITE_NOTADB,
        ] {
            let e = StoreError::from(sqlite_error(code, "no"));
            assert!(e.is_permanent() && !e.is_transient(), "{code}: {e:?}");
        }
        let full = StoreError::from(sqlite_error(ffi::SQLITE_FULL, "database or disk is full"));
        assert_eq!(
            error_chain(&full),
            "the store is full: no space is left on its disk, or the file is at its size \
             limit: database or disk is full"
        );
        for fail in [
            sqlite_error(ffi::SQLITE_CONSTRAINT, "UNIQUE constraint failed"),
            sqlite_error(ffi::SQLITE_MISUSE, "bad"),
            Fail::Invalid("x".into()),
        ] {
            let e = StoreError::from(fail);
            assert!(!e.is_transient() && !e.is_permanent(), "{e:?}");
        }
    }
}
