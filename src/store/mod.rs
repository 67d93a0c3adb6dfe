//! Store backends.

mod sqlite;

pub use sqlite::SqliteStore;
