//! The embedded command log: one JSON entry per line, each prefixed with its CRC-32, fsynced.
//!
//! Line format: `<crc32 of the JSON as 8 lowercase hex digits> <JSON>\n`. The format is text so
//! an operator can read the history with `cut -d' ' -f2- tidegate.log | jq`, and line-based so a
//! torn write (a crash in the middle of `write`) can only damage the last line.
//!
//! On open: a damaged *last* line is a torn write of an unacknowledged change (acknowledgement
//! waits for fsync), so it is cut off with a warning. A damaged line *followed by* good lines
//! cannot come from a crash; it is corruption, and start-up stops rather than guess.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{CommandLog, LogEntry, StoreError};

pub const LOG_FILE: &str = "tidegate.log";
const LOCK_FILE: &str = "tidegate.lock";

pub struct FileLog {
    path: PathBuf,
    file: File,
    /// Held for the life of the log: an exclusive lock so two instances never share a data dir.
    _lock: File,
    poisoned: bool,
}

/// What opening the log found.
pub struct Opened {
    pub log: FileLog,
    pub entries: Vec<LogEntry>,
    /// Torn tails that were dropped, as sentences for the start-up log.
    pub warnings: Vec<String>,
}

impl FileLog {
    /// Opens (creating if needed) the log in `dir`, takes the directory lock, drops a torn last
    /// line and returns the entries.
    pub fn open(dir: &Path) -> Result<Opened, StoreError> {
        let io_err = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { action, path, source }
        };
        fs::create_dir_all(dir).map_err(io_err("create data directory", dir))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err("open lock file", &lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(StoreError::Locked(dir.to_path_buf())),
            Err(fs::TryLockError::Error(e)) => return Err(io_err("lock", &lock_path)(e)),
        }

        let path = dir.join(LOG_FILE);
        let existed = path.exists();
        let data = match fs::read(&path) {
            Ok(data) => data,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        let parsed = parse(&path, &data)?;
        let mut warnings = Vec::new();
        if let Some(torn) = &parsed.torn {
            warnings.push(format!(
                "dropped a torn last record of {} bytes at byte {} of {} ({torn}); it was never acknowledged",
                data.len() - parsed.valid_len,
                parsed.valid_len,
                path.display()
            ));
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        if parsed.torn.is_some() {
            file.set_len(parsed.valid_len as u64).map_err(io_err("truncate", &path))?;
            file.sync_all().map_err(io_err("fsync", &path))?;
        }
        if !existed {
            // Make the new file's directory entry durable too, or a crash could lose the file.
            File::open(dir).and_then(|d| d.sync_all()).map_err(io_err("fsync", dir))?;
        }
        Ok(Opened {
            log: FileLog { path, file, _lock: lock, poisoned: false },
            entries: parsed.entries,
            warnings,
        })
    }
}

impl CommandLog for FileLog {
    fn append(&mut self, entry: &LogEntry) -> Result<(), StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        let line = encode_line(entry)?;
        // Why poison on failure: a failed write may have left part of a line behind; appending
        // after it would turn a harmless torn tail into corruption in the middle of the log.
        let result = self.file.write_all(line.as_bytes()).and_then(|()| self.file.sync_data());
        result.map_err(|source| {
            self.poisoned = true;
            StoreError::Io { action: "append to", path: self.path.clone(), source }
        })
    }

    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }
}

/// One log line for `entry`, newline included.
pub fn encode_line(entry: &LogEntry) -> Result<String, StoreError> {
    let json = serde_json::to_string(entry)?;
    Ok(format!("{:08x} {json}\n", crc32fast::hash(json.as_bytes())))
}

/// The entries held by a log file's bytes, as [`FileLog::open`] reads them but without I/O (the
/// log decoder fuzz target's entry point). A torn last line is dropped; damage before it is an error.
pub fn decode_log(data: &[u8]) -> Result<Vec<LogEntry>, StoreError> {
    parse(Path::new(LOG_FILE), data).map(|parsed| parsed.entries)
}

struct Parsed {
    entries: Vec<LogEntry>,
    /// Bytes that hold whole, valid lines.
    valid_len: usize,
    /// Why the tail after `valid_len` was judged torn, if there is one.
    torn: Option<String>,
}

fn parse(path: &Path, data: &[u8]) -> Result<Parsed, StoreError> {
    let mut entries = Vec::new();
    let mut offset = 0;
    while offset < data.len() {
        let line_no = entries.len() + 1;
        let Some(newline) = data[offset..].iter().position(|&b| b == b'\n') else {
            let torn = Some("no line end".to_owned());
            return Ok(Parsed { entries, valid_len: offset, torn });
        };
        let end = offset + newline;
        match decode_line(&data[offset..end]) {
            Ok(entry) => entries.push(entry),
            Err(LineError::Damaged(reason)) if end + 1 == data.len() => {
                return Ok(Parsed { entries, valid_len: offset, torn: Some(reason) });
            }
            Err(LineError::Damaged(reason)) | Err(LineError::Unreadable(reason)) => {
                return Err(StoreError::Corrupt {
                    path: path.to_path_buf(),
                    line: line_no,
                    offset: offset as u64,
                    reason,
                });
            }
        }
        offset = end + 1;
    }
    Ok(Parsed { entries, valid_len: data.len(), torn: None })
}

enum LineError {
    /// The bytes are not what was written (checksum or framing): a torn write if last.
    Damaged(String),
    /// The checksum holds but the entry makes no sense to this version: never a torn write.
    Unreadable(String),
}

fn decode_line(line: &[u8]) -> Result<LogEntry, LineError> {
    let damaged = |why: &str| LineError::Damaged(why.to_owned());
    if line.len() < 10 || line[8] != b' ' {
        return Err(damaged("the line has no checksum prefix"));
    }
    let crc_text = std::str::from_utf8(&line[..8]).map_err(|_| damaged("bad checksum prefix"))?;
    let expected = u32::from_str_radix(crc_text, 16).map_err(|_| damaged("bad checksum prefix"))?;
    let json = &line[9..];
    if crc32fast::hash(json) != expected {
        return Err(damaged("checksum mismatch"));
    }
    serde_json::from_slice(json)
        .map_err(|e| LineError::Unreadable(format!("unreadable entry: {e}")))
}
