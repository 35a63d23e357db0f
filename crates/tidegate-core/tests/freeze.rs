//! Loss-less drain steps in virtual time: freeze the units a step moves, switch them once every
//! live subscriber applied the freeze, unfreeze once every live subscriber applied the switch;
//! a freeze not applied everywhere within its window aborts back with no unit changed owner.
//! Plus the write check every service, edge and gateway answers with, as a fixture table.

use std::collections::BTreeMap;

use serde_json::Value;
use tidegate_core::{
    Audit, Command, CommandError, DrainAction, DrainMode, DrainPlan, DrainStatus, Envelope,
    FreezeBarrier, Genesis, Guard, Inputs, OnBreach, Reading, RoutingTable, State, StepConvergence,
    UnitMode, UnitScheme, UnitSet, WriteCheck, ZoneId, Zones,
};

fn state(blue_units: u32) -> State {
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    State::genesis(Genesis { scheme, blue_units }, Zones::default()).unwrap()
}

fn apply(state: &State, at_ms: u64, command: Command) -> Result<State, CommandError> {
    let env = Envelope {
        expected_version: state.version(),
        command,
        audit: Audit { by: "drain:1".into(), at_ms, reason: "test".into() },
    };
    Ok(state.apply(&env)?.map(|(s, _)| s).unwrap_or_else(|| state.clone()))
}

fn lossless(target_blue: u32, step: u32, window_ms: u64) -> DrainPlan {
    DrainPlan {
        zone: "az-b".into(),
        color: ZoneId::BLUE,
        target_blue_units: target_blue,
        step_units: step,
        interval_ms: 1000,
        guard: Guard {
            max_error_rate: 0.02,
            min_requests: 100,
            breaches: 2,
            on_breach: OnBreach::Pause,
        },
        mode: DrainMode::Maintenance,
        domain: None,
        freeze_ms: Some(window_ms),
        receivers: None,
    }
}

fn healthy() -> Reading {
    Reading::Known { error_rate: 0.0, requests: 1000 }
}

fn decide(state: &State, now: u64) -> Option<DrainAction> {
    let drain = state.active_drain().unwrap();
    let h = healthy();
    drain.decide(&Inputs {
        blue_units: state.table().blue_units(),
        now_ms: now,
        receiving_zone: "az-a",
        draining: &h,
        receiving: &h,
        convergence: &StepConvergence::Disabled,
        backlog: Some(0),
        capacity: None,
    })
}

fn barrier(state: &State, all_applied: bool) -> FreezeBarrier {
    let version = state.active_drain().unwrap().freeze_barrier_version().unwrap();
    FreezeBarrier {
        version,
        all_applied,
        behind: if all_applied { "" } else { "gw-1 (az-b, on v2)" }.into(),
    }
}

fn frozen(state: &State) -> Option<String> {
    state.table().frozen_in(None).map(ToString::to_string)
}

#[test]
fn a_step_freezes_exactly_the_units_it_moves_then_switches_then_unfreezes() {
    let s = apply(&state(50), 0, Command::StartDrain { plan: lossless(40, 5, 10_000) }).unwrap();
    // The guard passes: the step is a freeze, not a switch.
    assert_eq!(decide(&s, 0), Some(DrainAction::Freeze { blue_units: 45 }));
    let s = apply(&s, 0, Command::DrainFreeze { drain: 1, blue_units: 45 }).unwrap();
    assert_eq!(frozen(&s).as_deref(), Some("45-49"), "the diff of 50 -> 45 blue units");
    assert_eq!(s.table().blue_units(), 50, "freezing moves nobody");
    // `decide` leaves a freeze to `decide_freeze`.
    assert_eq!(decide(&s, 100), None);
    let drain = s.active_drain().unwrap();
    // Not every live subscriber applied the freeze: wait (inside the window).
    assert_eq!(drain.decide_freeze(5_000, &barrier(&s, false)), None);
    assert_eq!(
        drain.decide_freeze(5_000, &barrier(&s, true)),
        Some(DrainAction::Switch { blue_units: 45 })
    );
    let s = apply(&s, 5_000, Command::DrainStep { drain: 1, blue_units: 45 }).unwrap();
    assert_eq!(s.table().blue_units(), 45);
    assert_eq!(frozen(&s).as_deref(), Some("45-49"), "switched units stay frozen");
    // A second switch of the same freeze is refused.
    assert!(matches!(
        apply(&s, 5_001, Command::DrainStep { drain: 1, blue_units: 40 }),
        Err(CommandError::InvalidDrain(_))
    ));
    let drain = s.active_drain().unwrap();
    let Some(DrainAction::Unfreeze { aborted: false, .. }) =
        drain.decide_freeze(5_200, &barrier(&s, true))
    else {
        panic!("the switch applied everywhere unfreezes");
    };
    let s = apply(&s, 5_200, Command::DrainUnfreeze { drain: 1, aborted: false }).unwrap();
    assert_eq!(frozen(&s), None);
    let drain = s.active_drain().unwrap();
    assert_eq!(drain.freezes.len(), 1);
    assert_eq!(drain.freezes[0].window_ms, 5_200);
    assert_eq!(drain.freezes[0].switch_after_ms, Some(5_000));
    assert_eq!(drain.freezes[0].units, 5);
    // The next step is due an interval after the switch.
    assert_eq!(drain.next_due_ms, 6_000);
    assert_eq!(decide(&s, 5_999), None);
    assert_eq!(decide(&s, 6_000), Some(DrainAction::Freeze { blue_units: 40 }));
}

#[test]
fn a_freeze_not_applied_in_its_window_aborts_back_and_no_unit_changes_owner() {
    let s = apply(&state(50), 0, Command::StartDrain { plan: lossless(40, 10, 2_000) }).unwrap();
    let before: Vec<ZoneId> = s.table().unit_colors().collect();
    let s = apply(&s, 0, Command::DrainFreeze { drain: 1, blue_units: 40 }).unwrap();
    let drain = s.active_drain().unwrap();
    assert_eq!(drain.decide_freeze(1_999, &barrier(&s, false)), None);
    let Some(DrainAction::Unfreeze { aborted: true, reason }) =
        drain.decide_freeze(2_000, &barrier(&s, false))
    else {
        panic!("past the window the freeze aborts back");
    };
    assert!(reason.contains("gw-1"), "the hold names the stuck subscriber: {reason}");
    // A switch after the abort decision is no longer possible once applied.
    let s = apply(&s, 2_000, Command::DrainUnfreeze { drain: 1, aborted: true }).unwrap();
    assert_eq!(frozen(&s), None);
    let after: Vec<ZoneId> = s.table().unit_colors().collect();
    assert_eq!(before, after, "no unit changed owner");
    let drain = s.active_drain().unwrap();
    assert_eq!(drain.status, DrainStatus::Paused);
    assert_eq!(drain.pause_cause, Some("freeze"));
    assert_eq!(drain.steps_done, 0);
    assert!(drain.freezes[0].note.is_some() && drain.freezes[0].switch_after_ms.is_none());
}

#[test]
fn past_the_window_a_switched_freeze_still_unfreezes_since_stragglers_hold_the_freeze() {
    let s = apply(&state(50), 0, Command::StartDrain { plan: lossless(45, 5, 1_000) }).unwrap();
    let s = apply(&s, 0, Command::DrainFreeze { drain: 1, blue_units: 45 }).unwrap();
    let s = apply(&s, 100, Command::DrainStep { drain: 1, blue_units: 45 }).unwrap();
    let drain = s.active_drain().unwrap();
    assert_eq!(drain.decide_freeze(999, &barrier(&s, false)), None);
    let Some(DrainAction::Unfreeze { aborted: false, reason }) =
        drain.decide_freeze(1_000, &barrier(&s, false))
    else {
        panic!("a switched freeze ends at its window");
    };
    assert!(reason.contains("gw-1"), "{reason}");
    let s = apply(&s, 1_000, Command::DrainUnfreeze { drain: 1, aborted: false }).unwrap();
    // The target was reached: the drain completes only once the freeze ended.
    assert_eq!(s.drain(1).unwrap().status, DrainStatus::Completed);
    assert_eq!(frozen(&s), None);
}

#[test]
fn the_phases_cannot_be_skipped_or_swapped() {
    let s = apply(&state(50), 0, Command::StartDrain { plan: lossless(40, 5, 10_000) }).unwrap();
    // A loss-less drain never switches without a freeze.
    assert!(matches!(
        apply(&s, 0, Command::DrainStep { drain: 1, blue_units: 45 }),
        Err(CommandError::InvalidDrain(_))
    ));
    // Nothing to unfreeze yet.
    assert!(apply(&s, 0, Command::DrainUnfreeze { drain: 1, aborted: true }).is_err());
    let s = apply(&s, 0, Command::DrainFreeze { drain: 1, blue_units: 45 }).unwrap();
    // A freeze that has not switched can only be aborted back; a second freeze is refused.
    assert!(apply(&s, 1, Command::DrainUnfreeze { drain: 1, aborted: false }).is_err());
    assert!(apply(&s, 1, Command::DrainFreeze { drain: 1, blue_units: 45 }).is_err());
    let s = apply(&s, 2, Command::DrainStep { drain: 1, blue_units: 45 }).unwrap();
    // A switched freeze can only be unfrozen.
    assert!(apply(&s, 3, Command::DrainUnfreeze { drain: 1, aborted: true }).is_err());
    // A drain without `freeze` refuses freeze commands.
    let mut plain = lossless(40, 5, 1);
    plain.freeze_ms = None;
    let p = apply(&state(50), 0, Command::StartDrain { plan: plain }).unwrap();
    assert!(apply(&p, 0, Command::DrainFreeze { drain: 1, blue_units: 45 }).is_err());
    // The window is bounded.
    let too_long = lossless(40, 5, 600_001);
    assert!(apply(&state(50), 0, Command::StartDrain { plan: too_long }).is_err());
}

#[test]
fn every_way_a_drain_stops_mid_freeze_thaws_its_units_in_the_same_version() {
    let start =
        apply(&state(50), 0, Command::StartDrain { plan: lossless(40, 5, 10_000) }).unwrap();
    let frozen_state = apply(&start, 0, Command::DrainFreeze { drain: 1, blue_units: 45 }).unwrap();
    let switched =
        apply(&frozen_state, 1, Command::DrainStep { drain: 1, blue_units: 45 }).unwrap();
    for (name, s) in [("frozen", &frozen_state), ("switched", &switched)] {
        for stop in [
            Command::PauseDrain { drain: 1 },
            Command::AbortDrain { drain: 1 },
            Command::RollbackDrain { drain: 1 },
        ] {
            let action = stop.action();
            let after = apply(s, 10, stop).unwrap();
            assert_eq!(frozen(&after), None, "{action} of a {name} step leaves units frozen");
            let drain = after.drain(1).unwrap();
            assert!(drain.freeze.is_none());
            let note = drain.freezes.last().and_then(|r| r.note.clone()).unwrap_or_default();
            assert!(note.contains(action), "{action}: {note}");
        }
    }
    // A resumed drain freezes its next step again.
    let paused = apply(&frozen_state, 10, Command::PauseDrain { drain: 1 }).unwrap();
    let resumed = apply(&paused, 20, Command::ResumeDrain { drain: 1 }).unwrap();
    assert_eq!(decide(&resumed, 20), Some(DrainAction::Freeze { blue_units: 45 }));
}

#[test]
fn rollback_steps_and_evacuations_without_freeze_switch_at_once() {
    // Rolling back is the guard's remedy: it moves users back at once, unfrozen.
    let s = apply(&state(50), 0, Command::StartDrain { plan: lossless(40, 5, 10_000) }).unwrap();
    let s = apply(&s, 0, Command::DrainFreeze { drain: 1, blue_units: 45 }).unwrap();
    let s = apply(&s, 1, Command::DrainStep { drain: 1, blue_units: 45 }).unwrap();
    let s = apply(&s, 2, Command::DrainUnfreeze { drain: 1, aborted: false }).unwrap();
    let s = apply(&s, 3, Command::RollbackDrain { drain: 1 }).unwrap();
    assert_eq!(decide(&s, 3), Some(DrainAction::Step { blue_units: 50 }));
    let s = apply(&s, 3, Command::DrainStep { drain: 1, blue_units: 50 }).unwrap();
    assert_eq!(s.drain(1).unwrap().status, DrainStatus::RolledBack);
}

// ---- the write check -----------------------------------------------------------------------

/// A user whose unit satisfies `want` in a 100-unit hash scheme.
fn user_where(table: &RoutingTable, want: impl Fn(u32) -> bool) -> String {
    (0..100_000)
        .map(|i| format!("user-{i}"))
        .find(|u| want(table.scheme().unit_of(u).unwrap().0))
        .expect("a user in such a unit")
}

#[test]
fn write_check_fixture_table() {
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/write_checks.json"
    ));
    let cases: Value = serde_json::from_str(text).unwrap();
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let mut checked = 0;
    for case in cases["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let blue_units = case["blue_units"].as_u64().unwrap() as u32;
        let mut table = RoutingTable::from_parts(
            case["table_version"].as_u64().unwrap(),
            scheme,
            blue_units,
            BTreeMap::new(),
            Zones::default(),
        )
        .unwrap();
        let frozen_set = case["frozen"].as_str().map(|t| UnitSet::parse(t, 100).unwrap());
        if let Some(set) = &frozen_set {
            table =
                table.with_frozen(BTreeMap::from([("default".to_owned(), set.clone())])).unwrap();
        }
        let in_frozen = |u: u32| frozen_set.as_ref().is_some_and(|s| s.contains(u));
        let user = match case["user"].as_str().unwrap() {
            "blue" => user_where(&table, |u| u < blue_units && !in_frozen(u)),
            "green" => user_where(&table, |u| u >= blue_units && !in_frozen(u)),
            "frozen" => user_where(&table, in_frozen),
            other => panic!("{name}: unknown user kind {other}"),
        };
        if let Some(pin) = case["pin"].as_str() {
            let mut pins = BTreeMap::new();
            pins.insert(user.clone(), Zones::default().by_lane(pin).unwrap());
            let t = RoutingTable::from_parts(
                table.version(),
                scheme,
                blue_units,
                pins,
                Zones::default(),
            )
            .unwrap();
            table = t.with_frozen(table.frozen().clone()).unwrap();
        }
        let local = Zones::default().by_lane(case["local"].as_str().unwrap()).unwrap();
        let incoming = case["incoming"].as_u64();
        let check = table.check_write(None, &user, local, incoming).unwrap().unwrap();
        assert_eq!(check.as_str(), case["expect"].as_str().unwrap(), "{name}: {check:?}");
        match (check, case["owner"].as_str()) {
            (WriteCheck::Misrouted { owner } | WriteCheck::Frozen { owner, .. }, Some(lane)) => {
                assert_eq!(table.lane(owner), lane, "{name}: owner")
            }
            (_, None) => {}
            (other, Some(_)) => panic!("{name}: {other:?} names no owner"),
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} cases");
}

/// A loss-less unit move (`PUT /v1/units` or `PUT /v1/dial` with `freeze`): `FreezeUnits`
/// freezes exactly the units that change owner, nothing else changes a map meanwhile, the switch
/// makes the moves as `MoveUnits` would, the unfreeze thaws them; undone before the switch, no
/// unit changed owner.
#[test]
fn a_loss_less_unit_move_freezes_the_units_it_moves_and_holds_every_other_map_change() {
    use tidegate_core::{StagedStep, UnitMove};
    let s = state(50);
    let moves = vec![UnitMove {
        units: UnitSet::parse("40-59", 100).unwrap(),
        zone: ZoneId::GREEN,
        domain: None,
    }];
    let frozen_state = apply(
        &s,
        1_000,
        Command::FreezeUnits { moves: moves.clone(), pins: vec![], global: None, window_ms: 5_000 },
    )
    .unwrap();
    assert_eq!(frozen(&frozen_state).as_deref(), Some("40-49"), "50-59 are green already");
    assert_eq!(frozen_state.table().blue_units(), 50, "nothing moved yet");
    let change = frozen_state.units_change().unwrap().clone();
    assert_eq!(change.phases.frozen_version, frozen_state.version());
    // Every other map change waits for it.
    for command in [
        Command::SetBlueUnits { blue_units: 30, domain: None },
        Command::MoveUnits { moves: moves.clone() },
        Command::FreezeUnits { moves: moves.clone(), pins: vec![], global: None, window_ms: 5_000 },
        Command::StartDrain { plan: lossless(30, 10, 5_000) },
    ] {
        let e = apply(&frozen_state, 1_100, command).unwrap_err();
        assert!(matches!(e, CommandError::UnitsChanging), "{e}");
    }
    // Write checks answer frozen for 40-49 only.
    let t = frozen_state.table();
    let user_in = |set: &str| {
        let set = UnitSet::parse(set, 100).unwrap();
        (0..10_000)
            .map(|i| format!("user-{i}"))
            .find(|u| set.contains(t.tag_in(t.map(), u).unwrap().unit.0))
            .unwrap()
    };
    let moving = user_in("40-49");
    let staying = user_in("0-39");
    assert!(matches!(
        t.check_write(None, &moving, ZoneId::BLUE, None),
        Ok(Some(WriteCheck::Frozen { .. }))
    ));
    assert_eq!(t.check_write(None, &staying, ZoneId::BLUE, None), Ok(Some(WriteCheck::Owned)));
    // The barrier's rule: switch once every live subscriber has the freeze.
    let all = FreezeBarrier {
        version: change.phases.frozen_version,
        all_applied: true,
        behind: String::new(),
    };
    assert_eq!(change.decide(1_200, &all), Some(StagedStep::Switch));
    let switched = apply(&frozen_state, 1_200, Command::SwitchUnits).unwrap();
    assert_eq!(switched.table().blue_units(), 40);
    assert_eq!(frozen(&switched).as_deref(), Some("40-49"), "still frozen after the switch");
    let done = apply(&switched, 1_400, Command::UnfreezeUnits { aborted: false }).unwrap();
    assert_eq!(frozen(&done), None);
    assert!(done.units_change().is_none());
    assert_eq!(done.table().blue_units(), 40);
    // Undone at the window: the maps are as they were.
    let behind = FreezeBarrier {
        version: change.phases.frozen_version,
        all_applied: false,
        behind: "stuck-1 (az-a, on v1)".into(),
    };
    assert_eq!(change.decide(5_999, &behind), None);
    let Some(StagedStep::Unfreeze { aborted: true, reason }) = change.decide(6_000, &behind) else {
        panic!("the window passed")
    };
    assert!(reason.contains("stuck-1") && reason.contains("no unit changed owner"), "{reason}");
    let undone = apply(&frozen_state, 6_000, Command::UnfreezeUnits { aborted: true }).unwrap();
    assert_eq!(undone.table().map(), s.table().map());
    assert_eq!(frozen(&undone), None);
    assert!(apply(&switched, 1_300, Command::UnfreezeUnits { aborted: true }).is_err());
    // Moves that change nothing freeze nothing.
    let green = vec![UnitMove {
        units: UnitSet::parse("60-69", 100).unwrap(),
        zone: ZoneId::GREEN,
        domain: None,
    }];
    let same = apply(
        &s,
        1_000,
        Command::FreezeUnits { moves: green, pins: vec![], global: None, window_ms: 5_000 },
    )
    .unwrap();
    assert_eq!(same.version(), s.version(), "no version spent");
}

/// A loss-less pin change (`PUT`/`DELETE /v1/pins/{user}` with `freeze`): `FreezeUnits` with
/// pins freezes the user's unit in every domain where their owner changes (and nothing where it
/// does not), every write of that unit is frozen (the pinned user's too), the switch makes the
/// pin, the unfreeze thaws; undone before the switch, the user keeps their owner.
#[test]
fn a_loss_less_pin_freezes_the_users_unit_switches_the_pin_and_thaws() {
    use tidegate_core::{PinChange, WriteCheck};
    let s = state(50);
    let t = s.table();
    let blue_user = (0..10_000)
        .map(|i| format!("user-{i}"))
        .find(|u| t.tag(u).unwrap().color == ZoneId::BLUE)
        .unwrap();
    let unit = t.tag(&blue_user).unwrap().unit.0;
    let to_green = vec![PinChange { user_id: blue_user.clone(), zone: Some(ZoneId::GREEN) }];
    let frozen_state = apply(
        &s,
        1_000,
        Command::FreezeUnits {
            moves: vec![],
            pins: to_green.clone(),
            global: None,
            window_ms: 5_000,
        },
    )
    .unwrap();
    assert_eq!(frozen(&frozen_state), Some(unit.to_string()), "exactly the user's unit");
    let ft = frozen_state.table();
    assert!(ft.pins().is_empty(), "not pinned before the switch");
    for zone in [ZoneId::BLUE, ZoneId::GREEN] {
        let check = ft.check_write(None, &blue_user, zone, None).unwrap().unwrap();
        assert!(matches!(check, WriteCheck::Frozen { .. }), "{check:?}");
    }
    let switched = apply(&frozen_state, 1_200, Command::SwitchUnits).unwrap();
    let st = switched.table();
    assert_eq!(st.pins().get(&blue_user), Some(&ZoneId::GREEN));
    // Pinned now, and still frozen until the unfreeze: the freeze covers pinned users.
    let check = st.check_write(None, &blue_user, ZoneId::GREEN, None).unwrap().unwrap();
    assert!(matches!(check, WriteCheck::Frozen { .. }), "{check:?}");
    let done = apply(&switched, 1_400, Command::UnfreezeUnits { aborted: false }).unwrap();
    let check = done.table().check_write(None, &blue_user, ZoneId::GREEN, None).unwrap().unwrap();
    assert_eq!(check, WriteCheck::Owned);
    assert!(done.units_change().is_none());
    // Undone before the switch: no pin, nothing frozen.
    let undone = apply(&frozen_state, 6_100, Command::UnfreezeUnits { aborted: true }).unwrap();
    assert!(undone.table().pins().is_empty());
    assert_eq!(frozen(&undone), None);
    // A pin to the zone that owns the user already, or an unpin that keeps the owner, freezes
    // nothing and spends no version.
    let same = vec![PinChange { user_id: blue_user.clone(), zone: Some(ZoneId::BLUE) }];
    let kept = apply(
        &s,
        1_000,
        Command::FreezeUnits { moves: vec![], pins: same.clone(), global: None, window_ms: 5_000 },
    )
    .unwrap();
    assert_eq!(kept.version(), s.version(), "no owner changes: no version spent");
    // Unpinning a user not pinned is refused, as `Unpin` refuses it.
    let unpin = vec![PinChange { user_id: blue_user.clone(), zone: None }];
    assert!(matches!(
        apply(
            &s,
            1_000,
            Command::FreezeUnits {
                moves: vec![],
                pins: unpin.clone(),
                global: None,
                window_ms: 5_000
            }
        ),
        Err(CommandError::PinNotFound(_))
    ));
    // Unpinning the green pin gives the user back to blue: the unit freezes again.
    let back = apply(
        &done,
        2_000,
        Command::FreezeUnits { moves: vec![], pins: unpin, global: None, window_ms: 5_000 },
    )
    .unwrap();
    assert_eq!(frozen(&back), Some(unit.to_string()));
    // While it is in progress, a unit move waits for it.
    let moves = vec![tidegate_core::UnitMove {
        units: UnitSet::parse("0-9", 100).unwrap(),
        zone: ZoneId::GREEN,
        domain: None,
    }];
    let e = apply(&frozen_state, 1_100, Command::MoveUnits { moves }).unwrap_err();
    assert!(matches!(e, CommandError::UnitsChanging), "{e}");
}

/// Holds (a freeze in place, `HoldUnits`): the units named are frozen and nothing moves; held
/// once every live subscriber applied the freeze; inside a held hold a change of owner of held
/// units is made at once (their writes are refused everywhere) and one of other units is
/// refused; released (or at `hold_ms`) the units thaw; not applied in its window, it is undone.
mod hold {
    use tidegate_core::{
        Audit, Command, CommandError, Envelope, FreezeBarrier, Genesis, HeldUnits, PinChange,
        StagedStep, State, UnitMode, UnitMove, UnitScheme, UnitSet, WriteCheck, ZoneId, Zones,
    };

    fn state(blue_units: u32) -> State {
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        State::genesis(Genesis { scheme, blue_units }, Zones::default()).unwrap()
    }

    fn apply(state: &State, at_ms: u64, command: Command) -> Result<State, CommandError> {
        let env = Envelope {
            expected_version: state.version(),
            command,
            audit: Audit { by: "ops".into(), at_ms, reason: "test".into() },
        };
        Ok(state.apply(&env)?.map(|(s, _)| s).unwrap_or_else(|| state.clone()))
    }

    fn units(set: &str) -> UnitSet {
        UnitSet::parse(set, 100).unwrap()
    }

    fn hold(set: &str, global: bool) -> Command {
        let units = if set.is_empty() {
            vec![]
        } else {
            vec![HeldUnits { domain: None, units: units(set) }]
        };
        Command::HoldUnits { units, global, window_ms: 5_000, hold_ms: 60_000 }
    }

    fn barrier(version: u64, all_applied: bool) -> FreezeBarrier {
        FreezeBarrier { version, all_applied, behind: if all_applied { "" } else { "gw-1" }.into() }
    }

    fn user_in(state: &State, set: &str) -> String {
        let t = state.table();
        let set = units(set);
        (0..10_000)
            .map(|i| format!("user-{i}"))
            .find(|u| set.contains(t.tag_in(t.map(), u).unwrap().unit.0))
            .unwrap()
    }

    /// Freezes 0-19 in place, and switches (holds) it.
    fn held(s: &State) -> State {
        let frozen = apply(s, 1_000, hold("0-19", false)).unwrap();
        let change = frozen.units_change().unwrap().clone();
        let step = change.decide(1_100, &barrier(frozen.version(), true));
        assert_eq!(step, Some(StagedStep::Switch));
        apply(&frozen, 1_100, Command::SwitchUnits).unwrap()
    }

    #[test]
    fn a_hold_freezes_in_place_and_moves_nothing_until_every_subscriber_has_it() {
        let s = state(50);
        let frozen = apply(&s, 1_000, hold("0-19", false)).unwrap();
        assert_eq!(frozen.table().map(), s.table().map(), "a hold moves nothing");
        assert_eq!(
            frozen.table().frozen_in(None).map(ToString::to_string).as_deref(),
            Some("0-19")
        );
        let t = frozen.table();
        let inside = user_in(&frozen, "0-19");
        let outside = user_in(&frozen, "20-49");
        assert!(matches!(
            t.check_write(None, &inside, ZoneId::BLUE, None),
            Ok(Some(WriteCheck::Frozen { .. }))
        ));
        assert_eq!(t.check_write(None, &outside, ZoneId::BLUE, None), Ok(Some(WriteCheck::Owned)));
        let change = frozen.units_change().unwrap().clone();
        assert!(!change.is_held(), "not held before every live subscriber has it");
        // Not held yet: a move of held units waits like any move during a change.
        let moves = vec![UnitMove { units: units("0-19"), zone: ZoneId::GREEN, domain: None }];
        let e = apply(&frozen, 1_050, Command::MoveUnits { moves }).unwrap_err();
        assert!(matches!(e, CommandError::UnitsChanging), "{e}");
        // Nobody behind: held. Someone behind past the window: undone, nothing held.
        assert_eq!(change.decide(1_100, &barrier(frozen.version(), false)), None);
        match change.decide(6_000, &barrier(frozen.version(), false)) {
            Some(StagedStep::Unfreeze { aborted: true, reason }) => {
                assert!(reason.contains("gw-1"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        let undone = apply(&frozen, 6_000, Command::UnfreezeUnits { aborted: true }).unwrap();
        assert!(undone.table().frozen().is_empty());
        assert!(undone.units_change().is_none());
        assert_eq!(undone.table().map(), s.table().map());
    }

    #[test]
    fn inside_a_held_hold_a_move_of_held_units_is_made_at_once_and_others_wait() {
        let s = state(50);
        let h = held(&s);
        assert!(h.units_change().unwrap().is_held());
        // A held hold ends only by release or after hold_ms, whatever the barrier says.
        let change = h.units_change().unwrap().clone();
        assert_eq!(change.decide(50_000, &barrier(h.version(), true)), None);
        match change.decide(61_100, &barrier(h.version(), false)) {
            Some(StagedStep::Unfreeze { aborted: false, reason }) => {
                assert!(reason.contains("60000 ms"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        // Moving 10-19 (held) to green: at once, still frozen.
        let inside = vec![UnitMove { units: units("10-19"), zone: ZoneId::GREEN, domain: None }];
        for command in [
            Command::MoveUnits { moves: inside.clone() },
            Command::FreezeUnits {
                moves: inside.clone(),
                pins: vec![],
                global: None,
                window_ms: 5_000,
            },
        ] {
            let moved = apply(&h, 2_000, command).unwrap();
            assert_eq!(moved.table().blue_units(), 40, "made at once");
            assert_eq!(
                moved.table().frozen_in(None).map(ToString::to_string).as_deref(),
                Some("0-19")
            );
            assert_eq!(moved.units_change(), h.units_change(), "the hold goes on, no new change");
            let user = user_in(&moved, "10-19");
            assert!(matches!(
                moved.table().check_write(None, &user, ZoneId::GREEN, None),
                Ok(Some(WriteCheck::Frozen { .. }))
            ));
        }
        // Moving 20-29 (not held) waits for the hold to end: it would move writes nobody refuses.
        let outside = vec![UnitMove { units: units("15-29"), zone: ZoneId::GREEN, domain: None }];
        let e = apply(&h, 2_000, Command::MoveUnits { moves: outside }).unwrap_err();
        assert!(matches!(e, CommandError::UnitsChanging), "{e}");
        // A pin of a held user moves at once; one of a user outside the hold waits.
        let pin = |user: String| Command::FreezeUnits {
            moves: vec![],
            pins: vec![PinChange { user_id: user, zone: Some(ZoneId::GREEN) }],
            global: None,
            window_ms: 5_000,
        };
        let pinned = apply(&h, 2_000, pin(user_in(&h, "0-9"))).unwrap();
        assert_eq!(pinned.table().pins().len(), 1);
        assert!(matches!(
            apply(&h, 2_000, pin(user_in(&h, "30-39"))).unwrap_err(),
            CommandError::UnitsChanging
        ));
        // The release thaws the units, with the move kept.
        let moved = apply(&h, 2_000, Command::MoveUnits { moves: inside }).unwrap();
        let released = apply(&moved, 3_000, Command::UnfreezeUnits { aborted: false }).unwrap();
        assert!(released.table().frozen().is_empty());
        assert!(released.units_change().is_none());
        assert_eq!(released.table().blue_units(), 40);
    }

    #[test]
    fn a_hold_of_global_writes_lets_the_global_writer_move_at_once_and_stay_frozen() {
        let s = state(50);
        let frozen = apply(&s, 1_000, hold("", true)).unwrap();
        assert!(frozen.table().global().frozen);
        let e = apply(
            &frozen,
            1_050,
            Command::SetGlobalWriter { zone: Some(ZoneId::GREEN), read_only: false },
        )
        .unwrap_err();
        assert!(matches!(e, CommandError::UnitsChanging), "not held yet: {e}");
        let h = apply(&frozen, 1_100, Command::SwitchUnits).unwrap();
        let moved = apply(
            &h,
            2_000,
            Command::SetGlobalWriter { zone: Some(ZoneId::GREEN), read_only: false },
        )
        .unwrap();
        assert_eq!(moved.table().global().zone, Some(ZoneId::GREEN));
        assert!(moved.table().global().frozen, "global writes stay frozen until the release");
        let released = apply(&moved, 3_000, Command::UnfreezeUnits { aborted: false }).unwrap();
        assert!(!released.table().global().frozen);
        assert_eq!(released.table().global().zone, Some(ZoneId::GREEN));
        // A hold of units only does not let the global writer move.
        let units_only = held(&s);
        let e = apply(
            &units_only,
            2_000,
            Command::SetGlobalWriter { zone: Some(ZoneId::GREEN), read_only: false },
        )
        .unwrap_err();
        assert!(matches!(e, CommandError::UnitsChanging), "{e}");
    }

    #[test]
    fn a_hold_is_checked_before_it_freezes_anything() {
        let s = state(50);
        let cases: Vec<(Command, &str)> = vec![
            (hold("", false), "name the units"),
            (
                Command::HoldUnits {
                    units: vec![HeldUnits { domain: None, units: units("0-9") }],
                    global: false,
                    window_ms: 5_000,
                    hold_ms: tidegate_core::MAX_HOLD_MS + 1,
                },
                "hold: must be",
            ),
            (
                Command::HoldUnits {
                    units: vec![HeldUnits { domain: None, units: units("0-9") }],
                    global: false,
                    window_ms: 0,
                    hold_ms: 1_000,
                },
                "freeze_window",
            ),
            (
                Command::HoldUnits {
                    units: vec![HeldUnits { domain: Some("payments".into()), units: units("0-9") }],
                    global: false,
                    window_ms: 5_000,
                    hold_ms: 1_000,
                },
                "payments",
            ),
        ];
        for (command, says) in cases {
            let e = apply(&s, 1_000, command).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
        // One at a time: a hold waits for a change in progress, and a change for a hold not held.
        let frozen = apply(&s, 1_000, hold("0-9", false)).unwrap();
        assert!(matches!(
            apply(&frozen, 1_001, hold("20-29", false)).unwrap_err(),
            CommandError::UnitsChanging
        ));
        assert_eq!(
            Command::HoldUnits { units: vec![], global: true, window_ms: 1, hold_ms: 1 }
                .format_level(),
            10
        );
    }
}
