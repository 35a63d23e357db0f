//! The file log: durability framing, torn tails, corruption, replay and the directory lock.

use std::fs::{self, OpenOptions};
use std::io::Write;

use tidegate::core::{Audit, Command, Envelope, Genesis, UnitMode, UnitScheme, Zones};
use tidegate::service::coordinator::{Boot, Coordinator, StartError};
use tidegate::store::{FileLog, LOG_FILE, StoreError};

fn boot(units: u32) -> Boot {
    let scheme = UnitScheme::new(units, UnitMode::Hash).unwrap();
    Boot { genesis: Genesis { scheme, blue_units: units / 2 }, zones: Zones::default(), now_ms: 1 }
}

fn open(dir: &std::path::Path) -> Result<(Coordinator, Vec<String>), StartError> {
    let started = Coordinator::start(Box::new(FileLog::open(dir)?), None, boot(100))?;
    Ok((started.coordinator, started.warnings))
}

fn dial(c: &Coordinator, blue_units: u32) {
    let env = Envelope {
        expected_version: c.table().version(),
        command: Command::SetBlueUnits { blue_units, domain: None },
        audit: Audit { by: "alice".into(), at_ms: 2, reason: "test".into() },
    };
    c.submit(&env).unwrap();
}

#[test]
fn state_is_the_replay_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (c, _) = open(dir.path()).unwrap();
        dial(&c, 40);
        dial(&c, 10);
        assert_eq!(c.table().version(), 3);
    }
    let (c, warnings) = open(dir.path()).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(c.table().version(), 3);
    assert_eq!(c.table().blue_units(), 10);
    let audit = c.audit(10);
    assert_eq!(audit.len(), 3);
    assert_eq!(audit[0].version, 3);
    assert_eq!(audit[0].by, "alice");
    assert!(audit[0].from.contains("40%") && audit[0].to.contains("10%"), "{:?}", audit[0]);
}

#[test]
fn a_torn_last_record_is_dropped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (c, _) = open(dir.path()).unwrap();
        dial(&c, 40);
    }
    let path = dir.path().join(LOG_FILE);
    let good_len = fs::metadata(&path).unwrap().len();
    // Half of a record, as a crash in the middle of write(2) leaves it.
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"0badc0de {\"kind\":\"cha")
        .unwrap();
    let (c, warnings) = open(dir.path()).unwrap();
    assert_eq!(c.table().version(), 2);
    assert_eq!(c.table().blue_units(), 40);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("torn"), "{warnings:?}");
    assert_eq!(fs::metadata(&path).unwrap().len(), good_len, "the torn bytes were cut off");
    // And the log keeps working after the cut.
    dial(&c, 30);
    drop(c);
    let (c, warnings) = open(dir.path()).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(c.table().blue_units(), 30);
}

#[test]
fn a_last_line_with_zeroed_blocks_is_torn_too() {
    // A crash before fsync can persist the file size and the page holding the newline while an
    // earlier page of the line reads back as zeros. JSON lines never hold NUL, so it is torn.
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()).unwrap());
    let path = dir.path().join(LOG_FILE);
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[b"0badc0de {\"kind\":".as_slice(), &[0u8; 4096], b"\"x\"}\n"].concat())
        .unwrap();
    let (c, warnings) = open(dir.path()).unwrap();
    assert_eq!(c.table().version(), 1);
    assert!(warnings[0].contains("torn"), "{warnings:?}");
}

#[test]
fn a_single_nul_in_the_last_acknowledged_line_refuses_start_up() {
    // One byte of the fsynced last record reads back as NUL: damage, not a torn write (a crash
    // loses whole sectors). Cutting it off would drop an acknowledged change.
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = two_changes(dir.path()).into_bytes();
    let last = bytes[..bytes.len() - 1].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    bytes[last + 20] = 0;
    fs::write(dir.path().join(LOG_FILE), bytes).unwrap();
    let err = open(dir.path()).err().expect("an acknowledged change must not be dropped silently");
    assert!(matches!(err, StartError::Store(StoreError::Corrupt { line: 3, .. })), "{err}");
}

fn two_changes(dir: &std::path::Path) -> String {
    {
        let (c, _) = open(dir).unwrap();
        dial(&c, 40);
        dial(&c, 30);
    }
    fs::read_to_string(dir.join(LOG_FILE)).unwrap()
}

#[test]
fn a_flipped_byte_in_the_last_acknowledged_line_refuses_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = two_changes(dir.path());
    let last = text[..text.len() - 1].rfind('\n').unwrap() + 1;
    let at = last + text[last..].find("30").unwrap();
    text.replace_range(at..at + 2, "31");
    fs::write(dir.path().join(LOG_FILE), text).unwrap();
    let err = open(dir.path()).err().expect("an acknowledged change must not be dropped silently");
    assert!(matches!(err, StartError::Store(StoreError::Corrupt { line: 3, .. })), "{err}");
}

#[test]
fn a_newline_turned_into_a_space_refuses_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = two_changes(dir.path());
    let between = text[..text.len() - 1].rfind('\n').unwrap();
    text.replace_range(between..between + 1, " ");
    fs::write(dir.path().join(LOG_FILE), text).unwrap();
    let err = open(dir.path()).err().expect("two acknowledged changes must not be dropped");
    assert!(matches!(err, StartError::Store(StoreError::Corrupt { line: 2, .. })), "{err}");
}

#[test]
fn a_last_record_whose_newline_was_damaged_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = two_changes(dir.path());
    let end = text.len() - 1;
    text.replace_range(end.., " ");
    fs::write(dir.path().join(LOG_FILE), text).unwrap();
    let (c, warnings) = open(dir.path()).unwrap();
    assert_eq!((c.table().version(), c.table().blue_units()), (3, 30), "{warnings:?}");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    // The repaired file keeps working.
    dial(&c, 20);
    drop(c);
    let (c, warnings) = open(dir.path()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(c.table().blue_units(), 20);
}

#[test]
fn a_corrupt_middle_record_refuses_start_up() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (c, _) = open(dir.path()).unwrap();
        dial(&c, 40);
        dial(&c, 30);
    }
    let path = dir.path().join(LOG_FILE);
    let mut text = fs::read_to_string(&path).unwrap();
    // Flip a digit inside the second line's JSON: its checksum no longer holds.
    let second = text.find('\n').unwrap() + 1;
    let at = second + text[second..].find("40").unwrap();
    text.replace_range(at..at + 2, "41");
    fs::write(&path, text).unwrap();
    let err = open(dir.path()).err().expect("start-up must fail");
    let message = err.to_string();
    assert!(matches!(err, StartError::Store(StoreError::Corrupt { line: 2, .. })), "{message}");
    assert!(message.contains("line 2") && message.contains("checksum"), "{message}");
}

#[test]
fn a_changed_unit_count_refuses_start_up() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()).unwrap());
    let log = FileLog::open(dir.path()).unwrap();
    let err = Coordinator::start(Box::new(log), None, boot(1000)).err().unwrap();
    assert!(
        err.to_string().contains("100 units") && err.to_string().contains("1000 units"),
        "{err}"
    );
}

#[test]
fn two_instances_cannot_share_a_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let _first = FileLog::open(dir.path()).unwrap();
    assert!(matches!(FileLog::open(dir.path()).err(), Some(StoreError::Locked(_))));
}

#[test]
fn version_conflicts_are_not_logged() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _) = open(dir.path()).unwrap();
    let stale = Envelope {
        expected_version: 7,
        command: Command::SetBlueUnits { blue_units: 3, domain: None },
        audit: Audit { by: "alice".into(), at_ms: 2, reason: "stale".into() },
    };
    assert!(c.submit(&stale).is_err());
    let lines = fs::read_to_string(dir.path().join(LOG_FILE)).unwrap().lines().count();
    assert_eq!(lines, 1, "only the genesis entry");
}

#[test]
fn drains_replay_to_the_same_state() {
    use tidegate::core::{DrainPlan, Guard, OnBreach};
    let dir = tempfile::tempdir().unwrap();
    let submit = |c: &Coordinator, by: &str, at_ms: u64, command: Command| {
        let env = Envelope {
            expected_version: c.state().version(),
            command,
            audit: Audit { by: by.into(), at_ms, reason: "test".into() },
        };
        c.submit(&env).unwrap();
    };
    let before = {
        let (c, _) = open(dir.path()).unwrap();
        let guard = Guard {
            max_error_rate: 0.02,
            min_requests: 1,
            breaches: 2,
            on_breach: OnBreach::Pause,
        };
        let plan = DrainPlan {
            zone: "az-b".into(),
            color: tidegate::core::ZoneId::BLUE,
            target_blue_units: 0,
            step_units: 10,
            interval_ms: 1000,
            guard,
            mode: tidegate::core::DrainMode::Maintenance,
            domain: None,
            freeze_ms: None,
            receivers: None,
        };
        submit(&c, "alice", 10, Command::StartDrain { plan });
        submit(&c, "drain:1", 20, Command::DrainStep { drain: 1, blue_units: 40 });
        submit(
            &c,
            "drain:1",
            1020,
            Command::DrainHold { drain: 1, breach: true, reason: "hot".into() },
        );
        submit(&c, "alice", 1500, Command::PauseDrain { drain: 1 });
        c.state()
    };
    let (c, _) = open(dir.path()).unwrap();
    assert_eq!(*c.state(), *before);
    let drain = c.state().drain(1).unwrap().clone();
    assert_eq!(
        (drain.state_name(), drain.steps_done, drain.consecutive_breaches),
        ("paused", 1, 1)
    );
    assert_eq!(c.audit(1)[0].action, "drain_pause");
}
