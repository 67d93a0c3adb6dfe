//! One crawling process per embedded store file. Two crawls on one file
//! would fetch URLs twice and double each host's load, so the process that
//! drives a file's frontier holds an exclusive lock on `FILE.lock` beside
//! it. It is an OS file lock: it goes away with the process, however the
//! process ends, so a crash leaves nothing to clean up but the file, which
//! the next crawl locks again. A clean close removes the file, while it
//! still holds the lock; so a process that opened the file just before
//! checks, once it has the lock, that the path still names the file it
//! locked, and starts over if not. Readers (`report`, `search`, a user's
//! `sqlite3`) take no lock.

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
        // A holder that closes removes the file it locked: the lock taken
        // on that file, unlinked meanwhile, would be no lock at all.
        for _ in 0..8 {
            let lock = Self::acquire_once(db)?;
            if lock.path_names_it() {
                return Ok(lock);
            }
        }
        Err(StoreError::backend(
            format!("cannot lock {}", lock_path(db).display()),
            "its lock file was removed under us again and again",
        ))
    }

    /// Whether the lock file's path still names the file locked.
    fn path_names_it(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self._file.metadata(), std::fs::metadata(&self.path)) {
            (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
            _ => false,
        }
    }

    fn acquire_once(db: &Path) -> Result<Self, StoreError> {
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

impl Drop for WriterLock {
    /// A clean close leaves no lock file beside the store: removed while
    /// the lock is still held (the file is closed after this), so no other
    /// process can have locked it meanwhile.
    fn drop(&mut self) {
        if self.path_names_it()
            && let Err(e) = std::fs::remove_file(&self.path)
        {
            tracing::debug!(path = %self.path.display(), error = %e, "lock file not removed");
        }
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
pub(super) fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// A store is a file: a directory given as one is named as such (SQLite's
/// own word would be "unable to open the database file").
pub(super) fn not_a_directory(db: &Path) -> Result<(), StoreError> {
    if !db.is_dir() {
        return Ok(());
    }
    Err(StoreError::backend(
        format!("cannot open the store {}", db.display()),
        format!(
            "it is a directory; the store is a file, such as {}",
            db.join("crawler.db").display()
        ),
    ))
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
        assert!(
            !dir.path().join("crawl.db.lock").exists(),
            "a clean close removes the lock file"
        );
        WriterLock::acquire(&db).expect("free once the holder is gone");
    }

    #[test]
    fn a_lock_file_removed_under_the_taker_is_taken_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("crawl.db");
        let lock = WriterLock::acquire(&db).unwrap();
        // As if its holder closed between our open and our lock.
        std::fs::remove_file(lock.path()).unwrap();
        assert!(!lock.path_names_it());
        drop(lock);
        let again = WriterLock::acquire(&db).unwrap();
        assert!(again.path_names_it());
        drop(again);
        // A crash leaves the file, and its process's lock goes with it:
        // the next crawl locks the file as it is.
        std::fs::write(dir.path().join("crawl.db.lock"), "4242\n").unwrap();
        let next = WriterLock::acquire(&db).expect("a file a crash left is locked again");
        assert!(next.path_names_it());
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
