//! Unit tests of the history checker: bad histories (a lost acknowledgement, a duplicate, a
//! refused change that took effect, a wrong value, diverging hashes) must fail it.
//! Included by tests/ha_faults.rs only, so they run once.

use crate::ha_support::history::*;

fn dial(writer: usize, seq: u64, id: &str, expected: u64, units: u64, answer: Answer) -> Op {
    Op {
        writer,
        seq,
        id: id.into(),
        expected_version: expected,
        change: Change::Dial { blue_units: units },
        answer,
    }
}

fn acked(version: u64, value: u64) -> Answer {
    Answer::Acked { version, changed: true, value: value.to_string() }
}

fn decided(version: u64, id: &str, units: u64) -> Decided {
    Decided {
        version,
        id: Some(id.into()),
        to: format!("blue {units}% / green {}% ({units}/100 units blue)", 100 - units),
    }
}

fn sample(replica: &str, version: u64, hash: &str) -> Sample {
    Sample { replica: replica.into(), version, hash: hash.into() }
}

/// A good run: two writers, a conflict, an unknown that applied, a pin.
fn good() -> (Vec<Op>, Vec<Decided>, Vec<Sample>) {
    let ops = vec![
        dial(0, 0, "a", 1, 10, acked(2, 10)),
        dial(1, 0, "b", 1, 20, Answer::Refused { code: "version_conflict".into() }),
        dial(1, 1, "c", 2, 30, Answer::Unknown),
        dial(0, 1, "d", 3, 40, acked(4, 40)),
        Op {
            writer: 1,
            seq: 2,
            id: "e".into(),
            expected_version: 4,
            change: Change::Pin { user: "u1".into(), color: "green".into() },
            answer: Answer::Acked { version: 5, changed: true, value: "green".into() },
        },
    ];
    let mut history = vec![decided(2, "a", 10), decided(3, "c", 30), decided(4, "d", 40)];
    history.push(Decided { version: 5, id: Some("e".into()), to: "user u1 pinned green".into() });
    let samples = vec![sample("r1", 2, "h2"), sample("r2", 2, "h2"), sample("r1", 4, "h4")];
    (ops, history, samples)
}

fn run(ops: &[Op], history: Vec<Decided>, samples: &[Sample]) -> Result<Report, Vec<String>> {
    check(ops, &[("r1".into(), history.clone()), ("r2".into(), history)], samples)
}

fn fails_with(result: Result<Report, Vec<String>>, what: &str) {
    let errors = result.expect_err("a bad history must fail the check");
    assert!(errors.iter().any(|e| e.contains(what)), "wanted {what:?} in {errors:?}");
}

#[test]
fn a_good_history_passes_and_is_counted() {
    let (ops, history, samples) = good();
    let report = run(&ops, history, &samples).unwrap();
    assert_eq!(report.acked, 3);
    assert_eq!(report.refused, 1);
    assert_eq!((report.unknown, report.unknown_applied), (1, 1));
    assert_eq!(report.versions, 5);
    assert_eq!(report.hash_versions, 2);
}

#[test]
fn a_lost_acknowledgement_fails() {
    let (ops, mut history, samples) = good();
    history.retain(|d| d.id.as_deref() != Some("e"));
    fails_with(run(&ops, history, &samples), "lost: e");
}

#[test]
fn a_duplicate_fails() {
    let (mut ops, mut history, samples) = good();
    // "d" applied twice (a retry that was not deduplicated).
    history.push(decided(6, "d", 40));
    ops.push(dial(0, 2, "f", 5, 50, Answer::Unknown));
    fails_with(run(&ops, history, &samples), "command d took effect 2 times");
}

#[test]
fn a_refused_change_that_took_effect_fails() {
    let (ops, mut history, samples) = good();
    history.push(decided(6, "b", 20));
    fails_with(run(&ops, history, &samples), "b was refused (version_conflict) but took effect");
}

#[test]
fn a_wrong_value_fails_both_in_the_log_and_in_the_answer() {
    let (ops, mut history, samples) = good();
    history[2] = decided(4, "d", 45);
    fails_with(run(&ops, history, &samples), "wrong value: d asked for");
    let (mut ops, history, samples) = good();
    ops[3].answer = acked(4, 41);
    fails_with(run(&ops, history, &samples), "wrong value: d was told 41");
}

#[test]
fn diverging_hashes_fail() {
    let (ops, history, mut samples) = good();
    samples.push(sample("r3", 4, "other"));
    fails_with(run(&ops, history, &samples), "diverged at version 4");
}

#[test]
fn replicas_with_different_histories_fail() {
    let (ops, history, samples) = good();
    let mut other = history.clone();
    other[1] = decided(3, "c", 31);
    let result = check(&ops, &[("r1".into(), history), ("r2".into(), other)], &samples);
    fails_with(result, "r2 decided a different history");
}

#[test]
fn a_change_at_the_wrong_version_or_out_of_order_fails() {
    let (mut ops, history, samples) = good();
    // "d" claimed to expect version 2, but took effect at 4.
    ops[3].expected_version = 2;
    fails_with(run(&ops, history, &samples), "d expected version 2 but took effect at 4");
    let (mut ops, history, samples) = good();
    // Writer 0 made "d" before "a", yet "a" took effect first.
    ops[0].seq = 5;
    fails_with(run(&ops, history, &samples), "out of order: writer 0");
}

#[test]
fn a_noop_answer_that_took_effect_and_a_foreign_record_fail() {
    let (mut ops, history, samples) = good();
    ops[0].answer = Answer::Acked { version: 2, changed: false, value: "10".into() };
    fails_with(run(&ops, history, &samples), "a was answered as a no-op");
    let (ops, mut history, samples) = good();
    history.push(decided(6, "zz", 60));
    fails_with(run(&ops, history, &samples), "command zz, which no writer sent");
}

#[test]
fn reasons_carry_the_command_id() {
    assert_eq!(id_in_reason(&reason_for("w1-7-abc")).as_deref(), Some("w1-7-abc"));
    assert_eq!(id_in_reason("operator moved it"), None);
}
