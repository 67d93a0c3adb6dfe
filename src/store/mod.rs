//! Store backends: the embedded SQLite file (the default) and MongoDB.

mod mongo;
mod seen;
mod sqlite;

pub use mongo::{DEFAULT_DATABASE, MongoStore};
pub use sqlite::SqliteStore;
