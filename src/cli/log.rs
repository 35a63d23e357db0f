//! `tidegate log export` and `tidegate log import`: moving a single node's file log, with its whole
//! audit history, onto a fresh Kafka command topic, so that replicas started on that topic reach
//! the same version, state hash and audit trail as the file node.
//!
//! The export is the file log's entries as JSON lines (genesis first, then every decided change
//! with its audit: who, when, why). The import checks that they replay, then writes the genesis
//! (its log id kept, the zones pinned) and one proposal per change, each expecting the version
//! before it, under the command id `import-v<version>`; applying them decides each exactly as the
//! file node did. It refuses a topic that already holds records: merging two histories is not a
//! move. The records are appended with a window in flight, not one acknowledgement at a time.
//!
//! `log export` of a replica's configuration (`[store] kind = "kafka"`) backs up the command
//! topic in the same form: its genesis and every change that took effect, so a backup is
//! restored with `log import` into a fresh topic (docs/src/backup-restore.md).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Config, Overrides, StoreConfig};
use crate::core::ZoneId;
use crate::core::Zones;
use crate::mq::{KafkaCommandLog, KafkaLogReader, ensure_command_topic};
use crate::store::{
    AUDIT_IN_MEMORY, Applier, LOG_FILE, LogEntry, LogReader, Outcome, Step, decode_log, log_id_of,
    replay,
};

/// Writes every entry of the file log in `data_dir` to `out`, one JSON object per line.
pub fn export(data_dir: &Path, out: &mut dyn Write) -> Result<usize, String> {
    let path = data_dir.join(LOG_FILE);
    let data = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let entries = decode_log(&data).map_err(|e| e.to_string())?;
    if entries.is_empty() {
        return Err(format!("{} holds no entry: nothing to export", path.display()));
    }
    for entry in &entries {
        let line = serde_json::to_string(entry).map_err(|e| e.to_string())?;
        writeln!(out, "{line}").map_err(|e| format!("cannot write the export: {e}"))?;
    }
    out.flush().map_err(|e| format!("cannot write the export: {e}"))?;
    Ok(entries.len())
}

/// Reads an export (from `file`, else stdin) and appends it to the configured, empty Kafka topic.
pub fn import(config: &Path, file: Option<&PathBuf>) -> Result<(), String> {
    let config = Config::load(Some(config), &Overrides::default()).map_err(|e| e.to_string())?;
    let StoreConfig::Kafka { bootstrap, topic, allow_under_replicated, .. } = &config.store else {
        return Err("log import writes to a Kafka command topic: set `[store] kind = \"kafka\"` and `[store.kafka]` in --config".into());
    };
    let entries = match file {
        Some(path) => {
            let f = std::fs::File::open(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            read_export(std::io::BufReader::new(f))?
        }
        None => read_export(std::io::stdin().lock())?,
    };
    let plan = plan_import(&entries, &config.zones)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime
        .block_on(ensure_command_topic(bootstrap, topic, *allow_under_replicated))
        .map_err(|e| e.to_string())?;
    let mut reader = KafkaLogReader::new(bootstrap, topic).map_err(|e| e.to_string())?;
    let end = reader.end().map_err(|e| e.to_string())?;
    if end != 0 {
        return Err(format!(
            "command topic `{topic}` already holds {end} record(s); import only into a fresh, empty topic (stop the replicas, and name a new `[store.kafka] topic`)"
        ));
    }
    let log = KafkaCommandLog::new(bootstrap, topic).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    log.append_all(&plan.records, IMPORT_WINDOW).map_err(|e| e.to_string())?;
    let appended = started.elapsed();
    // Read it back as a replica would, and check it reached the file node's state.
    let first = reader.read_after(0, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    let Some((position, Ok(genesis))) = first.into_iter().next() else {
        return Err(format!("the genesis record written to `{topic}` cannot be read back"));
    };
    let mut applier = Applier::from_genesis(position, &genesis, AUDIT_IN_MEMORY)?;
    let end = reader.end().map_err(|e| e.to_string())?;
    while applier.next_position < end {
        let records = reader
            .read_after(applier.next_position, Duration::from_secs(1))
            .map_err(|e| e.to_string())?;
        for (position, record) in &records {
            applier.apply(*position, record.as_ref().map_err(String::as_str));
        }
    }
    if applier.state.version() != plan.version || applier.state_hash != plan.state_hash {
        return Err(format!(
            "the topic `{topic}` replays to version {} (state hash {:016x}), the file log to version {} ({:016x}): do not start replicas on it",
            applier.state.version(),
            applier.state_hash,
            plan.version,
            plan.state_hash
        ));
    }
    println!(
        "imported {} entries into `{topic}` in {:.1} s (checked by replay in {:.1} s): log {}, version {}, state hash {:016x}",
        plan.records.len(),
        appended.as_secs_f64(),
        started.elapsed().saturating_sub(appended).as_secs_f64(),
        applier.log_id,
        plan.version,
        plan.state_hash
    );
    Ok(())
}

/// Records in flight while importing (the idempotent producer keeps them in order).
const IMPORT_WINDOW: usize = 2_000;

/// Writes the decided history of a Kafka command topic to `out` in the file log's export form:
/// its genesis record, then every proposal that took effect as the change it made (version,
/// audit, from and to), in log order. Refused proposals, no-ops, duplicates and leases are not
/// history and are left out, so `log import` of the result into an empty topic (a restore)
/// replays to the same version, state hash and audit. The replicas may keep running: the export
/// covers the topic up to its end when the export started.
pub fn export_kafka(bootstrap: &str, topic: &str, out: &mut dyn Write) -> Result<usize, String> {
    let mut reader = KafkaLogReader::new(bootstrap, topic).map_err(|e| e.to_string())?;
    let end = reader.end().map_err(|e| e.to_string())?;
    if end == 0 {
        return Err(format!("command topic `{topic}` holds no record: nothing to export"));
    }
    let write = |out: &mut dyn Write, entry: &LogEntry| -> Result<(), String> {
        let line = serde_json::to_string(entry).map_err(|e| e.to_string())?;
        writeln!(out, "{line}").map_err(|e| format!("cannot write the export: {e}"))
    };
    let first = reader.read_after(0, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    let Some((position, Ok(genesis))) = first.into_iter().next() else {
        return Err(format!("the first record of `{topic}` cannot be read as a genesis record"));
    };
    let mut applier = Applier::from_genesis(position, &genesis, 1)?;
    write(out, &genesis)?;
    let mut written = 1;
    while applier.next_position < end {
        let records = reader
            .read_after(applier.next_position, Duration::from_secs(1))
            .map_err(|e| e.to_string())?;
        for (position, record) in &records {
            if *position >= end {
                break;
            }
            let record = match record {
                Ok(entry) => entry,
                Err(e) => {
                    // A replica stops at an unreadable record (docs/src/upgrades.md); so does a
                    // backup, rather than silently leaving history out.
                    return Err(format!(
                        "record at offset {position} of `{topic}` cannot be read ({e}); export with the release that wrote it"
                    ));
                }
            };
            let step = applier.apply(*position, Ok(record));
            if step != Step::Changed {
                continue;
            }
            let LogEntry::Proposal { id, expected_version, at_ms, by, reason, command } = record
            else {
                continue;
            };
            let Some(Outcome::Applied(applied)) = applier.outcome(id) else {
                return Err(format!("record at offset {position}: applied without an outcome"));
            };
            let change = LogEntry::Change {
                version: applied.version,
                expected_version: *expected_version,
                at_ms: *at_ms,
                by: by.clone(),
                reason: reason.clone(),
                command: command.clone(),
                from: applied.from.clone(),
                to: applied.to.clone(),
            };
            write(out, &change)?;
            written += 1;
        }
    }
    out.flush().map_err(|e| format!("cannot write the export: {e}"))?;
    Ok(written)
}

fn read_export(input: impl BufRead) -> Result<Vec<LogEntry>, String> {
    let mut entries = Vec::new();
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read the export: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str(&line)
            .map_err(|e| format!("line {} of the export is not a log entry: {e}", n + 1))?;
        entries.push(entry);
    }
    Ok(entries)
}

/// What an import writes, and the state it must reach.
struct ImportPlan {
    records: Vec<LogEntry>,
    version: u64,
    state_hash: u64,
}

/// The records for a shared log that decide to the same history as `entries` (a file log).
/// Pure: checks that the entries replay, and that their zones are the configuration's.
fn plan_import(entries: &[LogEntry], zones: &Zones) -> Result<ImportPlan, String> {
    let replayed = replay(entries, zones)
        .map_err(|e| format!("the export does not replay at entry {}: {}", e.line, e.reason))?;
    let log_zones = replayed.state.table().zones().clone();
    let names =
        |z: &Zones| (z.zone_of(ZoneId::BLUE).to_owned(), z.zone_of(ZoneId::GREEN).to_owned());
    if names(&log_zones) != names(zones) {
        return Err(format!(
            "the log's zones are blue in {}, green in {}, but `colors.blue`/`colors.green` say blue in {}, green in {}; replicas must agree with the log",
            log_zones.zone_of(ZoneId::BLUE),
            log_zones.zone_of(ZoneId::GREEN),
            zones.zone_of(ZoneId::BLUE),
            zones.zone_of(ZoneId::GREEN)
        ));
    }
    let mut records = Vec::with_capacity(entries.len());
    let LogEntry::Genesis { .. } = &entries[0] else {
        return Err("the export does not start with a genesis entry".into());
    };
    let mut genesis = entries[0].clone();
    let log_id = log_id_of(&entries[0]);
    if let LogEntry::Genesis { log_id: id, zones: pinned, .. } = &mut genesis {
        *id = Some(log_id);
        *pinned = Some(crate::store::WireZones {
            blue: log_zones.zone_of(ZoneId::BLUE).to_owned(),
            green: log_zones.zone_of(ZoneId::GREEN).to_owned(),
        });
    }
    records.push(genesis);
    for entry in &entries[1..] {
        let LogEntry::Change { version, expected_version, at_ms, by, reason, command, .. } = entry
        else {
            return Err("the export holds an entry that is not a decided change".into());
        };
        records.push(LogEntry::Proposal {
            id: format!("import-v{version}"),
            expected_version: *expected_version,
            at_ms: *at_ms,
            by: by.clone(),
            reason: reason.clone(),
            command: command.clone(),
        });
    }
    Ok(ImportPlan { records, version: replayed.state.version(), state_hash: replayed.state_hash })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Audit, Command, Envelope, Genesis, State, UnitMode, UnitScheme};

    #[test]
    fn an_import_decides_to_the_file_logs_version_and_hash() {
        let zones = Zones::default();
        let genesis =
            Genesis { scheme: UnitScheme::new(100, UnitMode::Hash).unwrap(), blue_units: 50 };
        let audit = Audit { by: "tidegate".into(), at_ms: 1, reason: "first".into() };
        let mut entries =
            vec![LogEntry::genesis_pinned(&genesis, &audit, "log-a".into(), Some(&zones))];
        let mut state = State::genesis(genesis, zones.clone()).unwrap();
        for (n, blue) in [10, 40, 35].into_iter().enumerate() {
            let envelope = Envelope {
                expected_version: state.version(),
                command: Command::SetBlueUnits { blue_units: blue, domain: None },
                audit: Audit { by: "alice".into(), at_ms: 10 + n as u64, reason: "move".into() },
            };
            let (next, applied) = state.apply(&envelope).unwrap().unwrap();
            entries.push(LogEntry::change(
                &envelope,
                applied.version,
                &applied.from,
                &applied.to,
                state.table().zones(),
            ));
            state = next;
        }
        let plan = plan_import(&entries, &zones).unwrap();
        let mut applier = Applier::from_genesis(0, &plan.records[0], 100).unwrap();
        for (i, record) in plan.records.iter().enumerate().skip(1) {
            applier.apply(i as u64, Ok(record));
        }
        assert_eq!(applier.state.version(), 4);
        assert_eq!((applier.state.version(), applier.state_hash), (plan.version, plan.state_hash));
        assert_eq!(applier.log_id, "log-a", "the file log's id is kept");
        let other = Zones::two("az-x", "az-y");
        let err = plan_import(&entries, &other).err().unwrap();
        assert!(err.contains("colors.blue"), "{err}");
    }
}
