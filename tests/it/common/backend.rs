//! The two store backends, opened the same way for the tests that run on both.
//! MongoDB tests use the server `scripts/mongo-server.sh` starts (the test
//! command starts it first; a bare `cargo test` starts it on demand). If no
//! server can be had, they fail loudly: they never skip. Without the
//! `mongodb` feature there is one backend and each `on_both_backends!` test
//! runs on SQLite alone.

use std::path::PathBuf;
use std::sync::Arc;
use web_crawler::actors::Store;
#[cfg(feature = "mongodb")]
use web_crawler::store::MongoStore;
use web_crawler::store::SqliteStore;

/// Where a test's store lives; `open` again = a restarted process.
pub enum Backend {
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    #[cfg(feature = "mongodb")]
    Mongo {
        uri: String,
        database: String,
        /// The crawl's index directory is in here: a MongoDB crawl's index
        /// would otherwise be left in the current directory.
        dir: tempfile::TempDir,
    },
}

impl Backend {
    pub fn sqlite() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        Backend::Sqlite { _dir: dir, path }
    }

    /// A fresh database on the test server, named after the test.
    #[cfg(feature = "mongodb")]
    pub fn mongo(test: &str) -> Backend {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let database = format!(
            "wc_{}_{}_{}",
            test.chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .take(30)
                .collect::<String>(),
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        Backend::Mongo {
            uri: mongo_uri(),
            database,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub async fn open(&self) -> Arc<dyn Store> {
        match self {
            Backend::Sqlite { path, .. } => Arc::new(SqliteStore::open(path).unwrap()),
            #[cfg(feature = "mongodb")]
            Backend::Mongo { uri, database, .. } => {
                Arc::new(MongoStore::connect(uri, database).await.unwrap())
            }
        }
    }

    pub fn is_mongo(&self) -> bool {
        match self {
            Backend::Sqlite { .. } => false,
            #[cfg(feature = "mongodb")]
            Backend::Mongo { .. } => true,
        }
    }

    /// The full-text index directory of a crawl of this store.
    #[cfg(feature = "search")]
    pub fn index_dir(&self) -> PathBuf {
        match self {
            Backend::Sqlite { path, .. } => web_crawler::search::index_dir_for(path),
            #[cfg(feature = "mongodb")]
            Backend::Mongo { dir, .. } => dir.path().join("index"),
        }
    }

    /// CLI flags selecting this store (and, for MongoDB, where its index is).
    #[cfg(feature = "cli")]
    pub fn cli_args(&self) -> Vec<String> {
        match self {
            Backend::Sqlite { path, .. } => vec!["--db".into(), path.display().to_string()],
            Backend::Mongo { uri, database, .. } => vec![
                "--mongodb".into(),
                uri.clone(),
                "--mongodb-database".into(),
                database.clone(),
                "--index".into(),
                self.index_dir().display().to_string(),
            ],
        }
    }
}

/// The test server's URI: `WEB_CRAWLER_TEST_MONGODB_URI`, or one started now.
#[cfg(feature = "mongodb")]
pub fn mongo_uri() -> String {
    use std::sync::OnceLock;
    static URI: OnceLock<String> = OnceLock::new();
    URI.get_or_init(|| {
        super::from_env_or_script(
            "WEB_CRAWLER_TEST_MONGODB_URI",
            &["mongo-server.sh", "start"],
            "these tests need a MongoDB-wire server and none could be started",
        )
    })
    .clone()
}

/// One test body, run on both backends: `on_both_backends!(name, body_fn)`
/// makes `name::sqlite` and `name::mongo`.
macro_rules! on_both_backends {
    ($name:ident, $body:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$body($crate::common::backend::Backend::sqlite()).await;
            }
            #[cfg(feature = "mongodb")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mongo() {
                super::$body($crate::common::backend::Backend::mongo(stringify!($name))).await;
            }
        }
    };
}
