//! Unit tests of the history checker: bad histories (a lost acknowledgement, a duplicate, a
//! refused change that took effect, a wrong value, diverging hashes, a linked move with one
//! domain, an answer describing a later state) must fail it.
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

fn linked(id: &str, expected: u64, answer: Answer) -> Op {
    Op {
        writer: 2,
        seq: 0,
        id: id.into(),
        expected_version: expected,
        change: Change::Linked {
            unit: 7,
            lane: "green".into(),
            search_unit: 60,
            search_lane: "blue".into(),
        },
        answer,
    }
}

#[test]
fn a_linked_change_counts_only_when_one_record_moved_both_domains() {
    let (mut ops, mut history, samples) = good();
    ops.push(linked(
        "l",
        5,
        Answer::Acked { version: 6, changed: true, value: "green/blue".into() },
    ));
    let both = "units 0-6 blue, 7 green, 8-49 blue, 50-99 green; domain search: units 0-49 blue, 50-59 green, 60 blue, 61-99 green";
    history.push(Decided { version: 6, id: Some("l".into()), to: both.into() });
    run(&ops, history.clone(), &samples).unwrap();
    // The search domain's unit never moved: not all of the change.
    history[4].to = "units 0-6 blue, 7 green, 8-49 blue, 50-99 green; domain search: units 0-49 blue, 50-99 green".into();
    fails_with(run(&ops, history.clone(), &samples), "wrong value: l asked for");
    // No search domain in the record at all.
    history[4].to = "units 0-6 blue, 7 green, 8-49 blue, 50-99 green".into();
    fails_with(run(&ops, history, &samples), "wrong value: l asked for");
}

#[test]
fn lanes_are_read_from_unit_maps() {
    let map = serde_json::json!([
        {"units": "0-6", "zone": "az-b", "lane": "blue"},
        {"units": "7", "zone": "az-a", "lane": "green"},
        {"units": "8-99", "zone": "az-b", "lane": "blue"}
    ]);
    assert_eq!(lane_in_map(&map, 7).as_deref(), Some("green"));
    assert_eq!(lane_in_map(&map, 8).as_deref(), Some("blue"));
    assert_eq!(lane_in_map(&map, 100), None);
}

#[test]
fn an_answer_from_after_its_change_fails_the_own_answer_check_only() {
    let (mut ops, history, samples) = good();
    ops.push(dial(
        0,
        2,
        "n",
        5,
        40,
        Answer::Acked { version: 5, changed: false, value: "40".into() },
    ));
    let own = own_answers(&ops, &history).unwrap();
    assert_eq!((own.changes, own.no_ops), (3, 1));
    // "a" told version 4 and 40: the state after "d", a later writer's change. The general
    // check accepts a later answer (it is not before the change); the own-answer check does not.
    ops[0].answer = acked(4, 40);
    run(&ops, history.clone(), &samples).unwrap();
    let errors = own_answers(&ops, &history).unwrap_err();
    assert!(errors[0].contains("a (Dial { blue_units: 10 }, writer 0) was answered with version 4 and 40, not its own version 2 and 10"), "{errors:?}");
    // A no-op answered with a later version.
    let (mut ops, history, _) = good();
    ops.push(dial(
        0,
        2,
        "n",
        5,
        40,
        Answer::Acked { version: 6, changed: false, value: "40".into() },
    ));
    let errors = own_answers(&ops, &history).unwrap_err();
    assert!(errors[0].contains("not its own version 5"), "{errors:?}");
}

#[test]
fn a_dial_on_a_map_of_runs_is_counted_run_by_run() {
    let (mut ops, mut history, samples) = good();
    // After linked moves the default map is runs, and the dial's record lists them.
    history[2].to = "units 0-6 blue, 7 green, 8-40 blue, 41-99 green; domain search: units 0-49 blue, 50-99 green".into();
    run(&ops, history.clone(), &samples).unwrap();
    ops[3].change = Change::Dial { blue_units: 41 };
    ops[3].answer = acked(4, 41);
    fails_with(run(&ops, history, &samples), "wrong value: d asked for");
}
