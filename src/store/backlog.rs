//! [`IndexBacklogFile`]: a worker node's durable queue of pages for its
//! index shard. A worker has no store of its own; its pool pushes each
//! page's index record here before it reports the page, and its indexer
//! reads the file from its head and deletes what it committed, so a node
//! killed with -9 indexes, when started again, what it fetched and had
//! not committed. One SQLite file (WAL) beside the shard: a page a row,
//! keyed by URL (a page fetched again replaces its row).

use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use web_crawler_actors::{Document, IndexBacklog, IndexQueue, Record, StoreError};

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS backlog (
    url    TEXT PRIMARY KEY,
    fields TEXT NOT NULL
) WITHOUT ROWID;";

/// The backlog file of the shard in `index_dir`: `DIR.backlog` beside it
/// (so that `index rebuild`, which makes the directory anew, leaves it).
pub fn backlog_path_for(index_dir: &Path) -> PathBuf {
    let mut path = index_dir.as_os_str().to_owned();
    path.push(".backlog");
    PathBuf::from(path)
}

/// A shard's backlog file (see the module doc).
#[derive(Debug, Clone)]
pub struct IndexBacklogFile {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
}

fn refused(context: &str, e: rusqlite::Error) -> StoreError {
    StoreError::refused(context.to_string(), e)
}

impl IndexBacklogFile {
    /// Open (or create) the backlog at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let context = format!("the index backlog {}", path.display());
        let conn = Connection::open(path).map_err(|e| refused(&context, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| refused(&context, e))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| refused(&context, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Pages waiting.
    pub fn len(&self) -> Result<u64, StoreError> {
        let conn = self.lock()?;
        conn.query_row("SELECT COUNT(*) FROM backlog", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| self.error(e))
    }

    pub fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len()? == 0)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Connection>, StoreError> {
        self.conn
            .lock()
            .map_err(|_| StoreError::backend("the index backlog's lock", "poisoned"))
    }

    fn error(&self, e: rusqlite::Error) -> StoreError {
        StoreError::backend(format!("the index backlog {}", self.path.display()), e)
    }

    /// Run `f` on the connection off the async threads.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Self) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || f(&this))
            .await
            .map_err(|e| StoreError::backend("the index backlog's thread", e))?
    }
}

fn url_of(doc: &Document) -> Option<&str> {
    doc.get("url").and_then(serde_json::Value::as_str)
}

#[web_crawler_actors::async_trait]
impl IndexQueue for IndexBacklogFile {
    async fn first(
        &self,
        after: Option<&Document>,
        limit: usize,
    ) -> Result<Vec<Document>, StoreError> {
        let after = after.and_then(url_of).unwrap_or("").to_string();
        self.with(move |this| {
            let conn = this.lock()?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT url, fields FROM backlog WHERE url > ?1 ORDER BY url LIMIT ?2",
                )
                .map_err(|e| this.error(e))?;
            let rows = stmt
                .query_map(params![after, limit as i64], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .map_err(|e| this.error(e))?;
            let mut docs = Vec::new();
            for row in rows {
                let (url, fields) = row.map_err(|e| this.error(e))?;
                let mut doc: Document = serde_json::from_str(&fields)
                    .map_err(|e| StoreError::Corrupt(format!("a backlog row of {url}: {e}")))?;
                doc.insert("url".into(), url.into());
                docs.push(doc);
            }
            Ok(docs)
        })
        .await
    }

    async fn delete(&self, keys: &[Document]) -> Result<u64, StoreError> {
        let urls: Vec<String> = keys
            .iter()
            .filter_map(|k| url_of(k).map(str::to_string))
            .collect();
        self.with(move |this| {
            let mut conn = this.lock()?;
            let tx = conn.transaction().map_err(|e| this.error(e))?;
            let mut deleted = 0;
            {
                let mut stmt = tx
                    .prepare_cached("DELETE FROM backlog WHERE url = ?1")
                    .map_err(|e| this.error(e))?;
                for url in &urls {
                    deleted += stmt.execute([url]).map_err(|e| this.error(e))? as u64;
                }
            }
            tx.commit().map_err(|e| this.error(e))?;
            Ok(deleted)
        })
        .await
    }
}

#[web_crawler_actors::async_trait]
impl IndexBacklog for IndexBacklogFile {
    async fn push(&self, records: Vec<Record>) -> Result<(), StoreError> {
        self.with(move |this| {
            let mut conn = this.lock()?;
            let tx = conn.transaction().map_err(|e| this.error(e))?;
            {
                let mut stmt = tx
                    .prepare_cached("INSERT OR REPLACE INTO backlog (url, fields) VALUES (?1, ?2)")
                    .map_err(|e| this.error(e))?;
                for record in &records {
                    let Some(url) = url_of(&record.key) else {
                        continue;
                    };
                    let fields = serde_json::to_string(&record.fields)
                        .map_err(|e| StoreError::backend("a backlog row", e))?;
                    stmt.execute(params![url, fields])
                        .map_err(|e| this.error(e))?;
                }
            }
            tx.commit().map_err(|e| this.error(e))
        })
        .await
    }
}

/// Whether a row for `url` waits (for tests and `status`).
impl IndexBacklogFile {
    pub fn holds(&self, url: &str) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        conn.query_row("SELECT 1 FROM backlog WHERE url = ?1", [url], |_| Ok(()))
            .optional()
            .map(|r| r.is_some())
            .map_err(|e| self.error(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use web_crawler_actors::{INDEX_QUEUE, PageText};

    fn record(url: &str, body: &str) -> Record {
        PageText {
            url: url.into(),
            title: "t".into(),
            body: body.into(),
            ..Default::default()
        }
        .into_record()
    }

    #[tokio::test]
    async fn pages_wait_in_url_order_until_deleted_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = backlog_path_for(&dir.path().join("w1.index"));
        let backlog = IndexBacklogFile::open(&path).unwrap();
        backlog
            .push(vec![
                record("http://h/b", "one"),
                record("http://h/a", "two"),
            ])
            .await
            .unwrap();
        backlog
            .push(vec![record("http://h/b", "again")])
            .await
            .unwrap();
        assert_eq!(
            backlog.len().unwrap(),
            2,
            "a page pushed again replaces its row"
        );
        drop(backlog);
        let backlog = IndexBacklogFile::open(&path).unwrap();
        let docs = backlog.first(None, 10).await.unwrap();
        let pages: Vec<PageText> = docs
            .iter()
            .map(|d| PageText::from_document(d).unwrap())
            .collect();
        assert_eq!(pages[0].url, "http://h/a");
        assert_eq!(pages[1].body, "again");
        let after = backlog.first(Some(&docs[0]), 10).await.unwrap();
        assert_eq!(after.len(), 1, "read on after a key");
        let mut key = Document::new();
        key.insert("url".into(), "http://h/a".into());
        assert_eq!(backlog.delete(&[key]).await.unwrap(), 1);
        assert!(!backlog.holds("http://h/a").unwrap());
        assert!(backlog.holds("http://h/b").unwrap());
        assert_eq!(record("http://x/", "").collection, INDEX_QUEUE);
    }
}
