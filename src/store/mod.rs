//! Store backends: the embedded SQLite file (the default) and MongoDB (with
//! the `mongodb` feature, on by default).

mod backlog;
#[cfg(feature = "mongodb")]
mod mongo;
mod seen;
mod sqlite;

pub use backlog::{IndexBacklogFile, backlog_path_for};

#[cfg(feature = "mongodb")]
pub use mongo::{DEFAULT_DATABASE, MongoStore};
pub use sqlite::{SqliteStore, WalState, WriterLock};
