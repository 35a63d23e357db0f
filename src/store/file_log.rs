//! The embedded command log: one JSON entry per line, each prefixed with its CRC-32, fsynced.
//!
//! Line format: `<crc32 of the JSON as 8 lowercase hex digits> <JSON>\n`. The format is text so
//! an operator can read the history with `cut -d' ' -f2- tidegate.log | jq`, and line-based so a
//! torn write (a crash in the middle of `write`) can only damage the last line.
//!
//! Positions ([`LogPosition`]) are byte offsets just after a line, so reading after a snapshot's
//! position seeks there and parses only the newer lines.
//!
//! On the first read, the framing tells a torn append from damage to an acknowledged record. A
//! crash can only cut the last append short: the file then ends in a prefix of a line with no
//! newline, or (when a page of the line was not written back before the crash) a line with a
//! sector or more of NUL bytes, which JSON lines never contain (a shorter run of NULs is damage). Such a tail was never acknowledged (acknowledgement
//! waits for fsync), so it is cut off with a warning. Every other line that ends in a newline was
//! written whole: if its checksum fails, it is damage to a record that may have been
//! acknowledged, and start-up stops rather than drop it, wherever the line is. A tail without a
//! newline that is a whole record whose checksum holds lost only its line end: it is kept and the
//! newline repaired.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::entry::LogEntry;
use super::log::{CommandLog, LogPosition, StoreError, Tail};

pub const LOG_FILE: &str = "tidegate.log";
const LOCK_FILE: &str = "tidegate.lock";

pub struct FileLog {
    path: PathBuf,
    file: File,
    /// Held for the life of the log: an exclusive lock so two instances never share a data dir.
    _lock: File,
    /// Bytes of whole lines in the file: the position after the last entry.
    len: u64,
    /// Set once `read_after` has looked at (and repaired) the tail: appends wait for it, so a
    /// torn last line is never followed by a good one.
    tail_checked: bool,
    poisoned: bool,
}

impl FileLog {
    /// Opens (creating if needed) the log in `dir` and takes the directory lock. Reads nothing:
    /// [`CommandLog::read_after`] reads, from the start or from a snapshot's position.
    pub fn open(dir: &Path) -> Result<FileLog, StoreError> {
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
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        if !existed {
            // Make the new file's directory entry durable too, or a crash could lose the file.
            File::open(dir).and_then(|d| d.sync_all()).map_err(io_err("fsync", dir))?;
        }
        let len = file.metadata().map_err(io_err("stat", &path))?.len();
        Ok(FileLog { path, file, _lock: lock, len, tail_checked: false, poisoned: false })
    }

    fn position_error(&self, position: LogPosition, reason: String) -> StoreError {
        StoreError::Position { log: self.describe(), position: position.0, reason }
    }

    /// The 1-based line number of the line that starts at byte `offset` (for error messages).
    fn line_at(&self, offset: u64) -> usize {
        let mut head = Vec::new();
        let read = File::open(&self.path).and_then(|f| f.take(offset).read_to_end(&mut head));
        match read {
            Ok(_) => head.iter().filter(|&&b| b == b'\n').count() + 1,
            Err(_) => 0,
        }
    }
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { action, path, source }
}

impl CommandLog for FileLog {
    fn read_after(&mut self, position: LogPosition) -> Result<Tail, StoreError> {
        let path = self.path.clone();
        let size = self.file.metadata().map_err(io_err("stat", &path))?.len();
        if position.0 > size {
            let why = format!("the log has only {size} bytes");
            return Err(self.position_error(position, why));
        }
        let mut reader = File::open(&path).map_err(io_err("open", &path))?;
        if position.0 > 0 {
            // The part a snapshot covers is not replayed, but its checksums are still checked:
            // a snapshot must never hide damage in the log (deleting the snapshot, which is
            // always allowed, would then make start-up refuse). Checksums only, no JSON: about
            // 0.35 s per GB (a 1 000 000-entry log of 249 MB: 93 ms of a 94 ms start).
            let mut last = [0u8];
            reader.seek(SeekFrom::Start(position.0 - 1)).map_err(io_err("seek", &path))?;
            reader.read_exact(&mut last).map_err(io_err("read", &path))?;
            if last[0] != b'\n' {
                return Err(self.position_error(position, "it is not at a line end".into()));
            }
            reader.seek(SeekFrom::Start(0)).map_err(io_err("seek", &path))?;
            // Streamed a line at a time through a 1 MB buffer (the newline found by memchr):
            // reading the covered part whole into memory first cost a page fault per 4 KB and
            // about twice the time.
            let covered = io::BufReader::with_capacity(1 << 20, (&mut reader).take(position.0));
            match check_checksums(covered).map_err(io_err("read", &path))? {
                Ok(()) => {}
                Err(Corrupt { line, offset, reason }) => {
                    let offset = offset as u64;
                    let reason = format!("{reason} (in the part the snapshot covers)");
                    return Err(StoreError::Corrupt { path, line, offset, reason });
                }
            }
        }
        let mut data = Vec::with_capacity((size - position.0) as usize);
        reader.read_to_end(&mut data).map_err(io_err("read", &path))?;
        let parsed = match parse(&data) {
            Ok(parsed) => parsed,
            Err(Corrupt { line, offset, reason }) => {
                let offset = position.0 + offset as u64;
                let line = if position.0 == 0 { line } else { self.line_at(offset) };
                return Err(StoreError::Corrupt { path, line, offset, reason });
            }
        };
        let mut valid_end = position.0 + parsed.valid_len as u64;
        let mut warnings = Vec::new();
        match &parsed.tail {
            TailState::Clean => {}
            TailState::Torn(torn) => warnings.push(format!(
                "dropped a torn last record of {} bytes at byte {valid_end} of {} ({torn}); it was never acknowledged",
                data.len() - parsed.valid_len,
                path.display()
            )),
            TailState::LineEndDamaged => warnings.push(format!(
                "the last record of {} had a damaged line end at byte {valid_end}; its checksum holds, so it was kept and the newline rewritten",
                path.display(),
            )),
        }
        if parsed.tail != TailState::Clean {
            self.file.set_len(valid_end).map_err(io_err("truncate", &path))?;
            if parsed.tail == TailState::LineEndDamaged {
                self.file.seek(SeekFrom::End(0)).map_err(io_err("seek in", &path))?;
                self.file.write_all(b"\n").map_err(io_err("repair the line end of", &path))?;
                valid_end += 1;
            }
            self.file.sync_all().map_err(io_err("fsync", &path))?;
        }
        self.len = valid_end;
        self.tail_checked = true;
        Ok(Tail { entries: parsed.entries, end: LogPosition(valid_end), warnings })
    }

    fn append(&mut self, entry: &LogEntry) -> Result<LogPosition, StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        if !self.tail_checked {
            return Err(StoreError::Unread);
        }
        let line = encode_line(entry)?;
        // Why poison on failure: a failed write may have left part of a line behind; appending
        // after it would turn a harmless torn tail into corruption in the middle of the log.
        let result = self.file.write_all(line.as_bytes()).and_then(|()| self.file.sync_data());
        result.map_err(|source| {
            self.poisoned = true;
            StoreError::Io { action: "append to", path: self.path.clone(), source }
        })?;
        self.len += line.len() as u64;
        Ok(LogPosition(self.len))
    }

    fn history_path(&self) -> Option<PathBuf> {
        Some(self.path.clone())
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

/// The entries held by a log file's bytes, as `read_after` reads them from the start, without I/O (the
/// log decoder fuzz target's entry point). A torn last line is dropped; damage before it is an error.
pub fn decode_log(data: &[u8]) -> Result<Vec<LogEntry>, StoreError> {
    parse(data).map(|parsed| parsed.entries).map_err(|Corrupt { line, offset, reason }| {
        StoreError::Corrupt { path: PathBuf::from(LOG_FILE), line, offset: offset as u64, reason }
    })
}

struct Parsed {
    entries: Vec<LogEntry>,
    /// Bytes that hold whole, valid lines (without the damaged newline for `LineEndDamaged`).
    valid_len: usize,
    tail: TailState,
}

/// What follows the last whole, valid line.
#[derive(Debug, PartialEq, Eq)]
enum TailState {
    Clean,
    /// A torn append, and why it was judged torn.
    Torn(String),
    /// A whole record whose checksum holds, but whose newline is another byte.
    LineEndDamaged,
}

/// A damaged line with good lines after it: 1-based line and byte offset within the data read.
struct Corrupt {
    line: usize,
    offset: usize,
    reason: String,
}

fn parse(data: &[u8]) -> Result<Parsed, Corrupt> {
    let mut entries = Vec::new();
    let mut offset = 0;
    while offset < data.len() {
        let line = entries.len() + 1;
        let Some(newline) = data[offset..].iter().position(|&b| b == b'\n') else {
            let tail = &data[offset..];
            if let Ok(entry) = decode_line(&tail[..tail.len() - 1]) {
                entries.push(entry);
                let valid_len = data.len() - 1;
                return Ok(Parsed { entries, valid_len, tail: TailState::LineEndDamaged });
            }
            let torn = TailState::Torn("no line end".to_owned());
            return Ok(Parsed { entries, valid_len: offset, tail: torn });
        };
        let end = offset + newline;
        let line_bytes = &data[offset..end];
        match decode_line(line_bytes) {
            Ok(entry) => entries.push(entry),
            Err(LineError::Damaged(reason))
                if end + 1 == data.len() && zeroed_sector(line_bytes) =>
            {
                let torn = TailState::Torn(format!("{reason}, with zeroed bytes"));
                return Ok(Parsed { entries, valid_len: offset, tail: torn });
            }
            Err(LineError::Damaged(reason)) | Err(LineError::Unreadable(reason)) => {
                return Err(Corrupt { line, offset, reason });
            }
        }
        offset = end + 1;
    }
    Ok(Parsed { entries, valid_len: data.len(), tail: TailState::Clean })
}

/// The smallest unit a crash can leave unwritten: a disk sector. A lost write-back zeroes whole
/// sectors (pages, usually), so a torn line holds at least this many NUL bytes in a row.
const SECTOR: usize = 512;

/// Whether the line holds a run of at least [`SECTOR`] NUL bytes: what a crash before fsync
/// leaves. A shorter run (a single NUL) is damage to what was written, like a flipped byte: it
/// used to be cut off as a torn write, dropping an acknowledged record with a warning that said
/// it was never acknowledged.
fn zeroed_sector(line: &[u8]) -> bool {
    let mut run = 0;
    for &b in line {
        run = if b == 0 { run + 1 } else { 0 };
        if run >= SECTOR {
            return true;
        }
    }
    false
}

enum LineError {
    /// The bytes are not what was written (checksum or framing): a torn write if last.
    Damaged(String),
    /// The checksum holds but the entry makes no sense to this version: never a torn write.
    Unreadable(String),
}

/// Checks every whole line's checksum without decoding it (the part of the log a snapshot
/// covers, which ends at a line end). Every line here is followed by a newline, so none of them
/// can be a torn append. The outer error is the read's; the inner one names the damaged line.
fn check_checksums(mut covered: impl io::BufRead) -> io::Result<Result<(), Corrupt>> {
    let mut line = Vec::with_capacity(1024);
    let (mut offset, mut number) = (0usize, 0usize);
    loop {
        line.clear();
        let n = covered.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(Ok(()));
        }
        number += 1;
        let whole = line.strip_suffix(b"\n").unwrap_or(&line);
        if let Err(reason) = line_checksum(whole) {
            return Ok(Err(Corrupt { line: number, offset, reason: reason.to_owned() }));
        }
        offset += n;
    }
}

/// The JSON of a line whose checksum holds.
fn line_checksum(line: &[u8]) -> Result<&[u8], &'static str> {
    if line.len() < 10 || line[8] != b' ' {
        return Err("the line has no checksum prefix");
    }
    let crc_text = std::str::from_utf8(&line[..8]).map_err(|_| "bad checksum prefix")?;
    let expected = u32::from_str_radix(crc_text, 16).map_err(|_| "bad checksum prefix")?;
    let json = &line[9..];
    if crc32fast::hash(json) != expected {
        return Err("checksum mismatch");
    }
    Ok(json)
}

/// One whole line (without its newline) of a log that start-up has already checked, decoded,
/// or why not: an audit page read from the log decodes only its own lines (`store::history`).
pub(super) fn decode_one_line(line: &[u8]) -> Result<LogEntry, String> {
    decode_line(line).map_err(|(LineError::Damaged(why) | LineError::Unreadable(why))| why)
}

fn decode_line(line: &[u8]) -> Result<LogEntry, LineError> {
    let json = line_checksum(line).map_err(|why| LineError::Damaged(why.to_owned()))?;
    serde_json::from_slice(json)
        .map_err(|e| LineError::Unreadable(format!("unreadable entry: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(json: &str) -> String {
        format!("{:08x} {json}\n", crc32fast::hash(json.as_bytes()))
    }

    #[test]
    fn the_streamed_check_names_the_damaged_line_and_its_offset_across_buffer_ends() {
        let lines: Vec<String> = (0..40).map(|i| line(&format!("{{\"n\":{i}}}"))).collect();
        let clean = lines.concat();
        // Buffers smaller than a line, about a line, and larger than the whole log.
        for capacity in [3, 11, 64, 1 << 20] {
            let reader = io::BufReader::with_capacity(capacity, clean.as_bytes());
            assert!(check_checksums(reader).unwrap().is_ok(), "capacity {capacity}");
            for damaged in [0, 1, 17, 39] {
                let mut text = lines.clone();
                text[damaged].replace_range(0..8, "00000000");
                let text = text.concat();
                let reader = io::BufReader::with_capacity(capacity, text.as_bytes());
                let corrupt = check_checksums(reader).unwrap().unwrap_err();
                let offset: usize = lines[..damaged].iter().map(String::len).sum();
                assert_eq!((corrupt.line, corrupt.offset), (damaged + 1, offset), "{capacity}");
                assert_eq!(corrupt.reason, "checksum mismatch");
            }
        }
        // An empty line in the middle has no checksum prefix.
        let text = format!("{}\n{}", lines[0], lines[1]);
        let corrupt = check_checksums(text.as_bytes()).unwrap().unwrap_err();
        assert_eq!((corrupt.line, corrupt.reason.as_str()), (2, "the line has no checksum prefix"));
    }
}
