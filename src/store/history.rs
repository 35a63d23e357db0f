//! Audit pages older than the in-memory trail, read from the log without replaying it from its
//! start (issue 21: every such page replayed the log's prefix, so paging a whole history of N
//! entries cost about N² / (2 × limit) entry applications).
//!
//! What an audit record needs decides how:
//! - A **file log**'s entry is a decided change that carries its own audit (version, time, who,
//!   why, from, to; the action is its command's kind, [`WireCommand::action`]), so a page needs
//!   no state at all. [`LineIndex`] keeps the byte offset of every [`LINE_MARK_EVERY`]-th line
//!   (line `i` holds version `i + 1`: every entry spends exactly one version), built by scanning
//!   the file's newlines once and extended as it grows; a page decodes its own lines and at most
//!   `LINE_MARK_EVERY - 1` before them.
//! - A **shared log**'s records are proposals: whether one took effect, and its from/to, come
//!   from applying it to the state before it. [`VersionIndex`], kept by the `Applier` as it
//!   applies, holds the position of the record that made each version and the state every
//!   [`STATE_MARK_EVERY`]-th version. A page starts from the newest such state at or below it
//!   and applies only the records that made versions (`decision::decide`, the applier's own
//!   decision), at most `STATE_MARK_EVERY - 1` of them before the page's own. Records that
//!   made no version (refusals, duplicates, leases) are read past, never applied.
//!
//! Memory: a file log's index is 8 bytes per [`LINE_MARK_EVERY`] entries (6.3 KB per 100 000);
//! a shared log's is 8 bytes per version (800 KB per 100 000) plus one state per
//! [`STATE_MARK_EVERY`] versions (98 per 100 000; a state shares its maps with the next one
//! wherever they did not change, so each holds little more than its routing table's unit map).
//!

use std::io::{Read, Seek, SeekFrom};

use crate::core::State;

use super::entry::{LogEntry, WireCommand};
use super::file_log::decode_one_line;
use super::log::{LogReader, ReadRecord};
use super::replay::{AuditRecord, genesis_audit};

/// A file log's line index keeps the offset of every this many lines.
pub const LINE_MARK_EVERY: u64 = 128;
/// A shared log's version index keeps the state of every this many versions.
pub const STATE_MARK_EVERY: u64 = 1_024;

/// The audit record of a file log's entry at 1-based `version`.
fn file_audit(entry: &LogEntry, version: u64) -> Result<AuditRecord, String> {
    let record = match entry {
        LogEntry::Genesis { .. } => genesis_audit(entry),
        LogEntry::Change { version, at_ms, by, reason, command, from, to, .. } => {
            Some(AuditRecord {
                version: *version,
                at_ms: *at_ms,
                by: by.clone(),
                reason: reason.clone(),
                action: WireCommand::action(command),
                from: from.clone(),
                to: to.clone(),
            })
        }
        LogEntry::Proposal { .. } | LogEntry::Lease { .. } => None,
    };
    match record {
        Some(record) if record.version == version => Ok(record),
        Some(record) => Err(format!(
            "line {version} holds version {}, not {version}: the log does not spend one version a line",
            record.version
        )),
        None => Err(format!("line {version} is a shared-log record, which a file log never holds")),
    }
}

/// Where a file log's lines start: the byte offset of every [`LINE_MARK_EVERY`]-th line.
#[derive(Debug)]
pub struct LineIndex {
    /// `starts[k]` is the offset of line `k * LINE_MARK_EVERY` (0-based).
    starts: Vec<u64>,
    /// Bytes scanned so far (always a line end), and the whole lines before it.
    scanned: u64,
    lines: u64,
}

impl Default for LineIndex {
    fn default() -> Self {
        LineIndex { starts: vec![0], scanned: 0, lines: 0 }
    }
}

impl LineIndex {
    /// Whole lines indexed so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Bytes of memory the index holds.
    pub fn bytes(&self) -> usize {
        self.starts.capacity() * std::mem::size_of::<u64>()
    }

    /// Scans `file` from where the last scan stopped up to byte `end` (a line end: the position
    /// after the log's newest entry), counting newlines only: no checksum, no JSON.
    pub fn extend(&mut self, file: &mut std::fs::File, end: u64) -> std::io::Result<()> {
        if end <= self.scanned {
            return Ok(());
        }
        file.seek(SeekFrom::Start(self.scanned))?;
        let mut chunk = vec![0u8; 1 << 20];
        let mut at = self.scanned;
        while at < end {
            let want = chunk.len().min((end - at) as usize);
            let read = file.read(&mut chunk[..want])?;
            if read == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the log ends at byte {at}, before {end}"),
                ));
            }
            for (i, _) in chunk[..read].iter().enumerate().filter(|(_, b)| **b == b'\n') {
                self.lines += 1;
                if self.lines.is_multiple_of(LINE_MARK_EVERY) {
                    self.starts.push(at + i as u64 + 1);
                }
            }
            at += read as u64;
        }
        self.scanned = end;
        Ok(())
    }

    /// The audit records of versions `lo..=hi` (oldest first), decoded from `file`'s own lines
    /// for them. `hi` must be indexed ([`LineIndex::lines`]).
    pub fn page(
        &self,
        file: &mut std::fs::File,
        lo: u64,
        hi: u64,
    ) -> Result<Vec<AuditRecord>, String> {
        if lo == 0 || hi < lo || hi > self.lines {
            return Err(format!(
                "versions {lo} to {hi} are not in the indexed {} lines",
                self.lines
            ));
        }
        // Lines are 0-based: version v is line v - 1.
        let first_line = (lo - 1) / LINE_MARK_EVERY * LINE_MARK_EVERY;
        let start = self.starts[(first_line / LINE_MARK_EVERY) as usize];
        let end = self.starts.get(hi.div_ceil(LINE_MARK_EVERY) as usize).copied();
        let end = end.unwrap_or(self.scanned);
        let mut bytes = vec![0u8; (end - start) as usize];
        file.seek(SeekFrom::Start(start)).map_err(|e| e.to_string())?;
        file.read_exact(&mut bytes).map_err(|e| format!("reading bytes {start} to {end}: {e}"))?;
        let mut out = Vec::with_capacity((hi - lo + 1) as usize);
        for (version, line) in (first_line + 1..).zip(bytes.split(|b| *b == b'\n')) {
            if version > hi {
                break;
            }
            if version >= lo {
                let entry =
                    decode_one_line(line).map_err(|why| format!("line {version}: {why}"))?;
                out.push(file_audit(&entry, version)?);
            }
        }
        if out.len() as u64 != hi - lo + 1 {
            return Err(format!("the log holds {} of versions {lo} to {hi}", out.len()));
        }
        Ok(out)
    }
}

/// A state kept by a [`VersionIndex`]: the state at `version`, and the position right after the
/// record that made it.
#[derive(Clone, Debug)]
struct Mark {
    version: u64,
    next: u64,
    state: State,
}

/// A shared log's versions: the position of the record that made each one, and the state every
/// [`STATE_MARK_EVERY`]-th version.
#[derive(Clone, Debug)]
pub struct VersionIndex {
    /// `made_at[i]` is the position of the record that made version `first + i`.
    first: u64,
    made_at: Vec<u64>,
    /// Ascending by version; the first is where the index starts (the genesis or a snapshot).
    marks: Vec<Mark>,
}

/// What reading one page from a shared log needs, copied out of a [`VersionIndex`] so the log
/// is read without holding the applier.
#[derive(Debug)]
pub struct PagePlan {
    /// The records the page wants: versions `lo..=hi`.
    lo: u64,
    hi: u64,
    /// The state at `from` (`from < max(lo, 2)`) and the position to read from.
    from: u64,
    next: u64,
    state: State,
    /// The positions of the records that made versions `from + 1 ..= hi`.
    made_at: Vec<u64>,
}

impl PagePlan {
    /// Where the page starts reading.
    pub fn position(&self) -> u64 {
        self.next
    }
}

impl VersionIndex {
    /// An index whose oldest known state is `state`, at `version`, with the next record to apply
    /// at `next`: the genesis (version 1) or a snapshot.
    pub fn starting(version: u64, next: u64, state: State) -> VersionIndex {
        VersionIndex {
            first: version + 1,
            made_at: Vec::new(),
            marks: vec![Mark { version, next, state }],
        }
    }

    /// The record at `position` made `version`, and `state` is the state after it.
    pub fn record(&mut self, version: u64, position: u64, state: &State) {
        if version != self.first + self.made_at.len() as u64 {
            // Not the next version (a bug): an index with a gap would give wrong pages, so it
            // stops here and pages past it are read by the slow path.
            return;
        }
        self.made_at.push(position);
        if version.is_multiple_of(STATE_MARK_EVERY) {
            self.marks.push(Mark { version, next: position + 1, state: state.clone() });
        }
    }

    /// The oldest version whose state the index has (pages need versions above it).
    pub fn oldest(&self) -> u64 {
        self.marks[0].version
    }

    /// The newest version indexed.
    pub fn newest(&self) -> u64 {
        self.first + self.made_at.len() as u64 - 1
    }

    /// Where the oldest known state's next record is.
    pub fn oldest_next(&self) -> u64 {
        self.marks[0].next
    }

    /// Bytes of memory the positions hold, and how many states are kept.
    pub fn footprint(&self) -> (usize, usize) {
        (self.made_at.capacity() * std::mem::size_of::<u64>(), self.marks.len())
    }

    /// What reading versions `lo..=hi` needs; `None` when the index does not reach them (a
    /// replica started from a snapshot indexes only what it applied since: see
    /// [`VersionIndex::prepend`]).
    pub fn plan(&self, lo: u64, hi: u64) -> Option<PagePlan> {
        if lo == 0 || hi < lo || hi > self.newest() {
            return None;
        }
        // The genesis made version 1 and is not a proposal: the page's records start at 2.
        let below = lo.max(2) - 1;
        let k = self.marks.partition_point(|m| m.version <= below);
        let mark = self.marks.get(k.checked_sub(1)?)?;
        let made_at = if hi > mark.version {
            let from = (mark.version + 1 - self.first) as usize;
            let to = (hi - self.first) as usize;
            self.made_at[from..=to].to_vec()
        } else {
            Vec::new()
        };
        Some(PagePlan {
            lo,
            hi,
            from: mark.version,
            next: mark.next,
            state: mark.state.clone(),
            made_at,
        })
    }

    /// Puts an index of the versions before this one's oldest state in front of it: `older`
    /// must end exactly at that state (built by reading the log from its start up to the
    /// snapshot this index began at).
    pub fn prepend(&mut self, older: VersionIndex) -> Result<(), String> {
        let (from, next) = (self.marks[0].version, self.marks[0].next);
        if older.newest() != from || older.marks[0].version != 1 {
            return Err(format!(
                "the log's start reaches version {} at its position {next}, where this replica's snapshot is at version {from}",
                older.newest()
            ));
        }
        let mut made_at = older.made_at;
        made_at.extend_from_slice(&self.made_at);
        let mut marks: Vec<Mark> = older.marks.into_iter().filter(|m| m.version < from).collect();
        marks.append(&mut self.marks);
        *self = VersionIndex { first: older.first, made_at, marks };
        Ok(())
    }
}

/// The audit records of a [`PagePlan`]'s versions (oldest first), read from `reader`: from the
/// plan's state, each record that made a version is applied by the applier's own decision and
/// checked to make exactly that version; every other record is read past. `genesis` is the
/// log's first record (for a page that reaches version 1). Gives up after `deadline`.
pub fn shared_page(
    reader: &mut dyn LogReader,
    plan: PagePlan,
    genesis: &LogEntry,
    deadline: std::time::Instant,
) -> Result<Vec<AuditRecord>, String> {
    let PagePlan { lo, hi, from, next, mut state, made_at } = plan;
    let mut out = Vec::with_capacity((hi - lo + 1) as usize);
    if lo == 1 {
        out.extend(genesis_audit(genesis));
    }
    let mut position = next;
    let mut wanted = made_at.iter().copied().zip(from + 1..).peekable();
    while wanted.peek().is_some() {
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "the log was not read up to version {hi} in time (reached position {position})"
            ));
        }
        let records: Vec<ReadRecord> = reader
            .read_after(position, std::time::Duration::from_secs(1))
            .map_err(|e| e.to_string())?;
        for (p, record) in records {
            let Some(&(at, version)) = wanted.peek() else { break };
            if p < position {
                continue;
            }
            position = p + 1;
            if p < at {
                continue;
            }
            if p > at {
                return Err(format!(
                    "the record that made version {version} (position {at}) was not read"
                ));
            }
            let entry = record.map_err(|why| format!("record {p} cannot be read: {why}"))?;
            let LogEntry::Proposal { expected_version, at_ms, by, reason, command, .. } = &entry
            else {
                return Err(format!("record {p} made version {version} but is not a proposal"));
            };
            let decided =
                super::decision::decide(&state, *expected_version, *at_ms, by, reason, command);
            let (next, record) = match decided {
                Ok(Some((next, _, record))) if record.version == version => (next, record),
                _ => return Err(format!("record {p} does not make version {version} again")),
            };
            if version >= lo {
                out.push(record);
            }
            state = next;
            wanted.next();
        }
    }
    Ok(out)
}
