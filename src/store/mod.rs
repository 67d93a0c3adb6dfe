//! Store backends: the embedded SQLite file (the default) and MongoDB (with
//! the `mongodb` feature, on by default).

mod index_queue;
#[cfg(feature = "mongodb")]
mod mongo;
mod seen;
mod sqlite;

pub use index_queue::{IndexQueueLog, queue_dir_for, queue_waiting_bytes};

#[cfg(feature = "mongodb")]
pub use mongo::{DEFAULT_DATABASE, MongoStore};
pub use sqlite::{SqliteStore, WalState, WriterLock};
