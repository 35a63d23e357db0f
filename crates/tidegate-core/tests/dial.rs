//! The dial: percent conversion (data-driven) and the stickiness properties (property tests).

use proptest::prelude::*;
use serde_json::Value;
use tidegate_core::{
    Audit, Command, DialError, Envelope, Genesis, RoutingTable, Share, State, Unit, UnitMode,
    UnitScheme, ZoneId, Zones,
};

#[test]
fn percent_conversion_cases() {
    let doc: Value = serde_json::from_str(include_str!("fixtures/dial_cases.json")).unwrap();
    for case in doc["cases"].as_array().unwrap() {
        let units = case["units"].as_u64().unwrap() as u32;
        let got = Share::from_percent(case["percent"].as_f64().unwrap(), units);
        match case["error"].as_str() {
            None => assert_eq!(
                got.map(|s| u64::from(s.blue_units)),
                Ok(case["blue_units"].as_u64().unwrap()),
                "{case}"
            ),
            Some("not_representable") => {
                assert!(matches!(got, Err(DialError::NotRepresentable { .. })), "{case}: {got:?}")
            }
            Some("out_of_range") => {
                assert!(matches!(got, Err(DialError::PercentOutOfRange(_))), "{case}: {got:?}")
            }
            Some(other) => panic!("unknown error kind {other}"),
        }
    }
}

#[test]
fn not_representable_names_the_nearest_values() {
    let err = Share::from_percent(12.5, 100).unwrap_err().to_string();
    assert!(err.contains("12") && err.contains("13"), "{err}");
}

fn state(units: u32, blue_units: u32) -> State {
    let scheme = UnitScheme::new(units, UnitMode::Hash).unwrap();
    State::genesis(Genesis { scheme, blue_units }, Zones::default()).unwrap()
}

fn envelope(version: u64, command: Command) -> Envelope {
    Envelope {
        expected_version: version,
        command,
        audit: Audit { by: "test".into(), at_ms: 0, reason: "property test".into() },
    }
}

/// Applies dial moves in order; a move to the current value is a no-op.
fn dial(mut state: State, moves: &[u32]) -> State {
    for &blue_units in moves {
        let env = envelope(state.version(), Command::SetBlueUnits { blue_units, domain: None });
        if let Some((next, _)) = state.apply(&env).unwrap() {
            state = next;
        }
    }
    state
}

fn colors(table: &RoutingTable) -> Vec<ZoneId> {
    table.unit_colors().collect()
}

proptest! {
    #[test]
    fn a_move_changes_exactly_the_difference(units in 2u32..=10_000, a in 0u32..=10_000, b in 0u32..=10_000) {
        let (a, b) = (a % (units + 1), b % (units + 1));
        let before = dial(state(units, a), &[]);
        let after = dial(before.clone(), &[b]);
        let changed = colors(before.table()).iter().zip(colors(after.table()).iter())
            .filter(|(x, y)| x != y).count();
        prop_assert_eq!(changed as u32, a.abs_diff(b));
        prop_assert_eq!(after.table().blue_units(), b);
    }

    #[test]
    fn there_and_back_restores_every_unit(units in 2u32..=2_000, a in 0u32..=2_000, b in 0u32..=2_000) {
        let (a, b) = (a % (units + 1), b % (units + 1));
        let start = state(units, a);
        let back = dial(start.clone(), &[b, a]);
        prop_assert_eq!(colors(start.table()), colors(back.table()));
    }

    #[test]
    fn users_flip_only_when_the_boundary_crosses_their_unit(
        moves in proptest::collection::vec(0u32..=100, 1..20),
        users in proptest::collection::vec("[a-z0-9]{1,12}", 1..50),
    ) {
        // Monotone: along any path, a user's colour at each step is a function of the boundary
        // alone (blue iff unit < boundary), never of the path taken to reach it.
        let mut s = state(100, 50);
        for &m in &moves {
            s = dial(s, &[m]);
            for user in &users {
                let tag = s.table().tag(user).unwrap();
                let expected = if tag.unit < Unit(m) { ZoneId::BLUE } else { ZoneId::GREEN };
                prop_assert_eq!(tag.color, expected);
            }
        }
    }

    #[test]
    fn same_history_same_table(moves in proptest::collection::vec(0u32..=100, 0..30)) {
        let one = dial(state(100, 50), &moves);
        let two = dial(state(100, 50), &moves);
        prop_assert_eq!(one, two);
    }

    #[test]
    fn shrinking_blue_only_moves_blue_users_to_green(a in 0u32..=100, b in 0u32..=100, user in "[ -~]{1,40}") {
        let (hi, lo) = (a.max(b), a.min(b));
        let s_hi = state(100, hi);
        let s_lo = dial(s_hi.clone(), &[lo]);
        let (before, after) = (s_hi.table().tag(&user).unwrap(), s_lo.table().tag(&user).unwrap());
        // Nobody goes green -> blue when blue shrinks.
        prop_assert!(!(before.color == ZoneId::GREEN && after.color == ZoneId::BLUE));
    }
}

#[test]
fn a_pin_wins_over_the_unit_and_survives_dial_moves() {
    let s = state(100, 100); // everyone blue
    let pin = envelope(1, Command::Pin { user_id: "tester".into(), color: ZoneId::GREEN });
    let (s, applied) = s.apply(&pin).unwrap().unwrap();
    assert_eq!(applied.version, 2);
    assert_eq!(s.table().tag("tester").unwrap().color, ZoneId::GREEN);
    assert!(s.table().tag("tester").unwrap().pinned);
    let s = dial(s, &[0, 100]);
    assert_eq!(s.table().tag("tester").unwrap().color, ZoneId::GREEN);
    let unpin = envelope(s.version(), Command::Unpin { user_id: "tester".into() });
    let (s, _) = s.apply(&unpin).unwrap().unwrap();
    assert_eq!(s.table().tag("tester").unwrap().color, ZoneId::BLUE);
}

#[test]
fn stale_versions_are_refused() {
    let s = dial(state(100, 50), &[40]);
    assert_eq!(s.version(), 2);
    let err =
        s.apply(&envelope(1, Command::SetBlueUnits { blue_units: 30, domain: None })).unwrap_err();
    assert_eq!(err.to_string(), "the routing table is at version 2, not the expected version 1");
}

#[test]
fn setting_the_current_value_spends_no_version() {
    let s = state(100, 50);
    assert!(
        s.apply(&envelope(1, Command::SetBlueUnits { blue_units: 50, domain: None }))
            .unwrap()
            .is_none()
    );
}

#[test]
fn every_change_needs_a_reason() {
    let s = state(100, 50);
    let mut env = envelope(1, Command::SetBlueUnits { blue_units: 40, domain: None });
    env.audit.reason = "  ".into();
    assert!(s.apply(&env).is_err());
}

#[test]
fn untagged_fallback_follows_the_share() {
    let s = state(100, 30);
    let t = s.table();
    use tidegate_core::Fallback;
    assert_eq!(t.untagged(Fallback::Random, 0.0).unwrap(), ZoneId::BLUE);
    assert_eq!(t.untagged(Fallback::Random, 0.2999).unwrap(), ZoneId::BLUE);
    assert_eq!(t.untagged(Fallback::Random, 0.3).unwrap(), ZoneId::GREEN);
    assert!(t.untagged(Fallback::Reject, 0.0).is_err());
    let blue = (0..1000)
        .filter(|i| t.untagged(Fallback::Random, *i as f64 / 1000.0).unwrap() == ZoneId::BLUE)
        .count();
    assert_eq!(blue, 300);
}
