//! One crawling process per embedded store file. Two crawls on one file
//! would fetch URLs twice and double each host's load, so the process that
//! drives a file's frontier holds an exclusive lock on `FILE.lock` beside
//! it. It is an OS file lock: it goes away with the process, however the
//! process ends, so a crash leaves nothing to clean up. Readers (`report`,
//! `search`, a user's `sqlite3`) take no lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use web_crawler_actors::StoreError;

/// The crawl's hold on a store file; released when dropped.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
    path: PathBuf,
}

impl WriterLock {
    /// Take the lock of the store at `db`, or say who holds it.
    pub fn acquire(db: &Path) -> Result<Self, StoreError> {
        let path = lock_path(db);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| match missing_directory(db) {
                Some(missing) => cannot_create_in(db, &missing),
                None => StoreError::backend(
                    format!("cannot create the lock file {}", path.display()),
                    e,
                ),
            })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = match holder.trim() {
                    "" => String::new(),
                    pid => format!(" (process {pid})"),
                };
                return Err(StoreError::Backend {
                    context: format!(
                        "another web_crawler process is crawling with {}{holder}: stop it, \
                         or give this crawl another --db",
                        db.display()
                    ),
                    source: "the store's lock is held".into(),
                });
            }
            Err(TryLockError::Error(e)) => {
                return Err(StoreError::backend(
                    format!("cannot lock {}", path.display()),
                    e,
                ));
            }
        }
        // Who holds it, for the message a second process prints.
        let _ = file.set_len(0);
        let _ = file.seek(SeekFrom::Start(0));
        let _ = writeln!(file, "{}", std::process::id());
        Ok(Self { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The first directory on the way to `file` that does not exist, if one
/// does not: `a/nope/dir/x.db` → `a/nope` when `a` exists.
pub(super) fn missing_directory(file: &Path) -> Option<PathBuf> {
    let parent = file.parent().filter(|p| !p.as_os_str().is_empty())?;
    if parent.is_dir() {
        return None;
    }
    let mut missing = parent;
    while let Some(up) = missing.parent().filter(|p| !p.as_os_str().is_empty()) {
        if up.exists() {
            break;
        }
        missing = up;
    }
    Some(missing.to_path_buf())
}

/// The store `db` cannot be created: the directory `missing` on its way
/// does not exist (the lock file's own name would only puzzle).
pub(super) fn cannot_create_in(db: &Path, missing: &Path) -> StoreError {
    StoreError::backend(
        format!("cannot create the store {}", db.display()),
        format!("the directory {} does not exist", missing.display()),
    )
}

/// `crawl.db` → `crawl.db.lock`.
fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_free_again_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("crawl.db");
        let first = WriterLock::acquire(&db).unwrap();
        assert_eq!(first.path(), dir.path().join("crawl.db.lock"));
        let second = WriterLock::acquire(&db).unwrap_err().to_string();
        assert!(
            second.contains("another web_crawler process is crawling with")
                && second.contains(&format!("(process {})", std::process::id())),
            "{second}"
        );
        drop(first);
        WriterLock::acquire(&db).expect("free once the holder is gone");
    }

    #[test]
    fn a_store_in_a_missing_directory_names_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nope/dir/x.db");
        let e = WriterLock::acquire(&db).unwrap_err();
        let said = format!("{}: {}", e, std::error::Error::source(&e).unwrap());
        assert_eq!(
            said,
            format!(
                "cannot create the store {}: the directory {} does not exist",
                db.display(),
                dir.path().join("nope").display()
            )
        );
        assert_eq!(missing_directory(&dir.path().join("x.db")), None);
        assert_eq!(
            missing_directory(Path::new("x.db")),
            None,
            "the current one"
        );
    }
}
