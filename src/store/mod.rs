//! Store backends: the embedded SQLite file (the default) and MongoDB (with
//! the `mongodb` feature, on by default).

#[cfg(feature = "mongodb")]
mod mongo;
mod seen;
mod sqlite;

#[cfg(feature = "mongodb")]
pub use mongo::{DEFAULT_DATABASE, MongoStore};
pub use sqlite::{SqliteStore, WalState, WriterLock};
