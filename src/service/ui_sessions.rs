//! Ended web UI sessions: a revocation list of session IDs, kept until the session would have
//! expired anyway, and written to `data_dir/ui-revoked` so that a restart does not bring a
//! logged-out cookie back to life.
//!
//! Why a revocation list and not a table of live sessions: the session cookie stays a
//! self-contained, encrypted value that any coordinator holding `ui.secret_key` can check, and
//! only the (few) sessions that ended early need to be shared. With several coordinator replicas
//! the list becomes records in the replicated log (ID and expiry, idempotent, order-free), and
//! each replica applies them as this one applies its file on start-up.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file under `data_dir`: one `<session id> <expires_ms>` line per ended session.
pub const FILE_NAME: &str = "ui-revoked";

/// Compact the file once it holds this many more lines than live entries.
const COMPACT_SLACK: usize = 1024;

pub struct Revocations {
    file: Option<PathBuf>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Session ID → when the session would have expired (ms since the epoch).
    revoked: HashMap<String, u64>,
    lines_in_file: usize,
}

impl Revocations {
    /// A list that lives only in memory (tests, and a coordinator whose data dir is read-only).
    pub fn in_memory() -> Revocations {
        Revocations { file: None, inner: Mutex::new(Inner::default()) }
    }

    /// Loads `dir/ui-revoked`, dropping entries that have expired, and rewrites it compacted.
    pub fn open(dir: &Path, now_ms: u64) -> io::Result<Revocations> {
        let path = dir.join(FILE_NAME);
        let mut revoked = HashMap::new();
        match File::open(&path) {
            Ok(file) => {
                for line in BufReader::new(file).lines() {
                    // A torn last line (crash mid-append) parses as nothing and is dropped.
                    if let Some((id, expires)) = parse_line(&line?)
                        && expires > now_ms
                    {
                        revoked.insert(id, expires);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let list = Revocations {
            file: Some(path),
            inner: Mutex::new(Inner { revoked, lines_in_file: 0 }),
        };
        {
            let mut inner = list.lock();
            list.rewrite(&mut inner)?;
        }
        Ok(list)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Ends session `id` (which would expire at `expires_ms`). Durable before it returns.
    pub fn revoke(&self, id: &str, expires_ms: u64, now_ms: u64) -> io::Result<()> {
        let mut inner = self.lock();
        inner.revoked.retain(|_, expires| *expires > now_ms);
        inner.revoked.insert(id.to_owned(), expires_ms);
        let Some(path) = &self.file else { return Ok(()) };
        if inner.lines_in_file > inner.revoked.len() + COMPACT_SLACK {
            return self.rewrite(&mut inner);
        }
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        file.write_all(format!("{id} {expires_ms}\n").as_bytes())?;
        file.sync_data()?;
        inner.lines_in_file += 1;
        Ok(())
    }

    pub fn is_revoked(&self, id: &str) -> bool {
        self.lock().revoked.contains_key(id)
    }

    /// How many ended sessions are remembered (those that have not expired yet, and a few more
    /// until the next revocation prunes them).
    pub fn len(&self) -> usize {
        self.lock().revoked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the live entries to a temporary file, fsyncs it and renames it into place.
    fn rewrite(&self, inner: &mut Inner) -> io::Result<()> {
        let Some(path) = &self.file else { return Ok(()) };
        let tmp = path.with_extension("tmp");
        let mut text = String::new();
        for (id, expires) in &inner.revoked {
            text.push_str(&format!("{id} {expires}\n"));
        }
        let mut file = File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            File::open(dir)?.sync_all()?;
        }
        inner.lines_in_file = inner.revoked.len();
        Ok(())
    }
}

fn parse_line(line: &str) -> Option<(String, u64)> {
    let (id, expires) = line.split_once(' ')?;
    let valid = !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit());
    valid.then_some(())?;
    Some((id.to_owned(), expires.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revocation_survives_a_reopen_until_the_session_would_have_expired() {
        let dir = tempfile::tempdir().unwrap();
        let list = Revocations::open(dir.path(), 1_000).unwrap();
        list.revoke("aa11", 5_000, 1_000).unwrap();
        list.revoke("bb22", 9_000, 1_000).unwrap();
        assert!(list.is_revoked("aa11") && !list.is_revoked("cc33"));
        let again = Revocations::open(dir.path(), 2_000).unwrap();
        assert!(again.is_revoked("aa11") && again.is_revoked("bb22"));
        let later = Revocations::open(dir.path(), 6_000).unwrap();
        assert!(!later.is_revoked("aa11"), "expired sessions need no revocation");
        assert!(later.is_revoked("bb22"));
    }

    #[test]
    fn a_torn_last_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "aa11 5000\nbb2").unwrap();
        let list = Revocations::open(dir.path(), 1_000).unwrap();
        assert!(list.is_revoked("aa11"));
        assert_eq!(list.len(), 1);
    }
}
