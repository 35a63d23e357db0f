//! Loss-less channel changes in pure code: what a change freezes (computed from the diff), the
//! three phases through `State::apply`, the write check during each, and the barrier's rule.

use tidegate_core::{
    Audit, Channel, ChannelFallback, ChannelSpec, Command, Envelope, FreezeBarrier, Genesis,
    StagedStep, State, UnitMap, UnitMode, UnitScheme, UnitSet, WriteCheck, ZoneClass, ZoneId,
    ZoneSpec, Zones, change_freeze,
};

const NOW_MS: u64 = 1_000;

fn start() -> State {
    let zones = Zones::from_specs(vec![
        ZoneSpec::new("az-b", "blue", ZoneClass::Rzone),
        ZoneSpec::new("az-a", "green", ZoneClass::Rzone),
    ])
    .unwrap();
    let scheme = UnitScheme::new(100, UnitMode::Digits { skip: 0 }).unwrap();
    State::genesis(Genesis { scheme, blue_units: 50 }, zones).unwrap()
}

fn apply_at(state: &State, command: Command, at_ms: u64) -> Result<State, String> {
    let envelope = Envelope {
        expected_version: state.version(),
        command,
        audit: Audit { by: "test".into(), at_ms, reason: "channel change test".into() },
    };
    match state.apply(&envelope) {
        Ok(Some((next, _))) => Ok(next),
        Ok(None) => Ok(state.clone()),
        Err(e) => Err(e.to_string()),
    }
}

fn apply(state: &State, command: Command) -> Result<State, String> {
    apply_at(state, command, NOW_MS)
}

fn channel(units: &str, zone: ZoneId, services: &[&str], users: &[&str]) -> Channel {
    ChannelSpec {
        name: "orders-v2".into(),
        domain: None,
        services: services.iter().map(|s| (*s).to_owned()).collect(),
        zone,
        percent: None,
        units: (!units.is_empty()).then(|| UnitSet::parse(units, 100).unwrap()),
        users: users.iter().map(|u| (*u).to_owned()).collect(),
        fallback: ChannelFallback::Global,
        expires_at_ms: None,
    }
    .resolve(100, NOW_MS)
    .unwrap()
}

const GREEN: ZoneId = ZoneId(1);

/// A case: its name, the channel before and after, the frozen units and users.
type Row = (&'static str, Option<Channel>, Option<Channel>, &'static str, Vec<&'static str>);

/// A row per case: before, after, the frozen units and users. The map is blue 0-49, green
/// 50-99.
#[test]
fn a_change_freezes_exactly_the_writes_whose_owner_it_moves() {
    let map = UnitMap::dial(100, 50);
    let orders = &["orders"][..];
    let rows: Vec<Row> = vec![
        // New channel to green: only its blue units change owner.
        ("new", None, Some(channel("40-59", GREEN, orders, &[])), "40-49", vec![]),
        // Widened: the added units whose map owner is not green.
        (
            "widen",
            Some(channel("40-44", GREEN, orders, &[])),
            Some(channel("40-49,90-95", GREEN, orders, &[])),
            "45-49",
            vec![],
        ),
        // Another zone: every unit whose owner differs before and after.
        (
            "rezone",
            Some(channel("45-54", GREEN, orders, &[])),
            Some(channel("45-54", ZoneId::BLUE, orders, &[])),
            "50-54,45-49",
            vec![],
        ),
        // Deleted: its units whose map owner is not its zone.
        ("delete", Some(channel("45-54", GREEN, orders, &[])), None, "45-49", vec![]),
        // A service added: that service's calls of the channel's blue units move.
        (
            "service",
            Some(channel("45-54", GREEN, orders, &[])),
            Some(channel("45-54", GREEN, &["orders", "carts"], &[])),
            "45-49",
            vec![],
        ),
        // Listed users: the added one; the kept one stays.
        (
            "users",
            Some(channel("", GREEN, orders, &["alice"])),
            Some(channel("", GREEN, orders, &["alice", "bob"])),
            "",
            vec!["bob"],
        ),
        // Nothing moves: the same definition.
        (
            "same",
            Some(channel("45-54", GREEN, orders, &["alice"])),
            Some(channel("45-54", GREEN, orders, &["alice"])),
            "",
            vec![],
        ),
    ];
    for (case, before, after, units, users) in rows {
        let f = change_freeze(&map, "orders-v2", before.as_ref(), after.as_ref());
        let want = if units.is_empty() {
            UnitSet::default()
        } else {
            let mut all: Vec<u32> = units
                .split(',')
                .flat_map(|r| UnitSet::parse(r, 100).unwrap().iter().collect::<Vec<_>>())
                .collect();
            all.sort_unstable();
            UnitSet::from_sorted(&all).unwrap()
        };
        assert_eq!(f.units, want, "{case}: units");
        let got: Vec<&str> = f.users.iter().map(String::as_str).collect();
        assert_eq!(got, users, "{case}: users");
        assert_eq!(f.is_empty(), units.is_empty() && users.is_empty(), "{case}");
    }
}

/// Users by unit: `unit_user(u)` is a user ID of unit `u`.
fn unit_user(state: &State, unit: u32) -> String {
    let user = format!("10{unit:02}");
    let tag = state.table().tag_service(None, &user, None).unwrap().unwrap().0;
    assert_eq!(tag.unit.0, unit, "the digits scheme puts {user} in unit {unit}");
    user
}

#[test]
fn freeze_switch_unfreeze_through_the_state_and_the_write_check_in_each_phase() {
    let s =
        apply(&start(), Command::PutChannel { channel: channel("40-44", GREEN, &["orders"], &[]) })
            .unwrap();
    let moving = unit_user(&s, 47); // blue by the map, green once widened
    let kept = unit_user(&s, 42); // green by the channel, before and after
    let check = |s: &State, user: &str, service: &str, local: ZoneId| {
        s.table().check_write_for(None, Some(service), user, local, None).unwrap().unwrap()
    };
    let wide = channel("40-49", GREEN, &["orders"], &[]);
    let frozen = apply_at(
        &s,
        Command::FreezeChannel {
            name: "orders-v2".into(),
            next: Some(wide.clone()),
            window_ms: 5_000,
        },
        2_000,
    )
    .unwrap();
    let change = frozen.channel_change().unwrap().clone();
    assert_eq!((change.phases.frozen_version, change.phases.switched), (frozen.version(), None));
    assert_eq!(frozen.table().channel_freeze().unwrap().units.to_string(), "45-49");
    // Freezing: the moving user's orders writes are frozen in either zone; their billing writes
    // and the kept user's orders writes are judged as before.
    assert_eq!(
        check(&frozen, &moving, "orders", ZoneId::BLUE),
        WriteCheck::Frozen { owner: ZoneId::BLUE, unit: 47 }
    );
    assert!(matches!(check(&frozen, &moving, "orders", GREEN), WriteCheck::Frozen { .. }));
    assert_eq!(check(&frozen, &moving, "billing", ZoneId::BLUE), WriteCheck::Owned);
    assert_eq!(check(&frozen, &kept, "orders", GREEN), WriteCheck::Owned);
    // A caller newer than the table is `behind` first, as everywhere.
    let newer = frozen.version() + 1;
    assert!(matches!(
        frozen.table().check_write_for(None, Some("orders"), &moving, ZoneId::BLUE, Some(newer)),
        Ok(Some(WriteCheck::Behind { .. }))
    ));
    // The channel takes no other change meanwhile, and no second change starts.
    let refused = apply(&frozen, Command::PutChannel { channel: wide.clone() }).unwrap_err();
    assert!(refused.contains("is being changed loss-lessly"), "{refused}");
    let refused =
        apply(&frozen, Command::DeleteChannel { name: "orders-v2".into(), expired: true })
            .unwrap_err();
    assert!(refused.contains("is being changed loss-lessly"), "{refused}");
    let refused = apply(
        &frozen,
        Command::FreezeChannel { name: "orders-v2".into(), next: None, window_ms: 5_000 },
    )
    .unwrap_err();
    assert!(refused.contains("is being changed loss-lessly"), "{refused}");
    // An unfreeze that says "switched" before the switch is refused.
    assert!(
        apply(&frozen, Command::UnfreezeChannel { name: "orders-v2".into(), aborted: false })
            .is_err()
    );

    // Switched: the channel is wide; the moving user is still frozen.
    let switched =
        apply_at(&frozen, Command::SwitchChannel { name: "orders-v2".into() }, 2_300).unwrap();
    assert_eq!(switched.table().channels()["orders-v2"], wide);
    assert!(matches!(
        check(&switched, &moving, "orders", GREEN),
        WriteCheck::Frozen { owner: GREEN, .. }
    ));
    assert!(apply(&switched, Command::SwitchChannel { name: "orders-v2".into() }).is_err());
    assert!(
        apply(&switched, Command::UnfreezeChannel { name: "orders-v2".into(), aborted: true })
            .is_err(),
        "a switched change cannot be undone by an abort"
    );

    // Unfrozen: green owns the moving user's orders writes, blue's are misrouted.
    let done = apply_at(
        &switched,
        Command::UnfreezeChannel { name: "orders-v2".into(), aborted: false },
        2_600,
    )
    .unwrap();
    assert!(done.channel_change().is_none() && done.table().channel_freeze().is_none());
    assert_eq!(check(&done, &moving, "orders", GREEN), WriteCheck::Owned);
    assert_eq!(
        check(&done, &moving, "orders", ZoneId::BLUE),
        WriteCheck::Misrouted { owner: GREEN }
    );

    // Aborted: the freeze is undone and the channel is as it was.
    let aborted =
        apply(&frozen, Command::UnfreezeChannel { name: "orders-v2".into(), aborted: true })
            .unwrap();
    assert_eq!(aborted.table().channels(), s.table().channels());
    assert!(aborted.channel_change().is_none() && aborted.table().channel_freeze().is_none());
    assert_eq!(check(&aborted, &moving, "orders", ZoneId::BLUE), WriteCheck::Owned);

    // A delete goes through the same phases.
    let deleting = apply(
        &s,
        Command::FreezeChannel { name: "orders-v2".into(), next: None, window_ms: 5_000 },
    )
    .unwrap();
    assert_eq!(deleting.table().channel_freeze().unwrap().units.to_string(), "40-44");
    let gone = apply(&deleting, Command::SwitchChannel { name: "orders-v2".into() }).unwrap();
    assert!(gone.table().channels().is_empty());
    let bad =
        apply(&s, Command::FreezeChannel { name: "nope".into(), next: None, window_ms: 5_000 })
            .unwrap_err();
    assert!(bad.contains("there is no channel `nope`"), "{bad}");
    let bad = apply(
        &s,
        Command::FreezeChannel { name: "orders-v2".into(), next: Some(wide), window_ms: 0 },
    )
    .unwrap_err();
    assert!(bad.starts_with("freeze_window:"), "{bad}");
}

/// The barrier's rule, a row per case: (switched, all applied, held ms, barrier version matches)
/// → the next phase.
#[test]
fn the_barrier_switches_on_every_subscriber_and_gives_up_at_the_window() {
    let change = |switched: Option<(u64, u64)>| tidegate_core::ChannelChange {
        name: "orders-v2".into(),
        next: None,
        phases: tidegate_core::Phases {
            frozen_version: 7,
            frozen_ms: 1_000,
            window_ms: 5_000,
            switched,
        },
    };
    let barrier = |version, all_applied| FreezeBarrier {
        version,
        all_applied,
        behind: if all_applied { String::new() } else { "edge-1 (az-a, on v6)".into() },
    };
    let freezing = change(None);
    let switched = change(Some((8, 1_200)));
    assert_eq!(freezing.decide(1_100, &barrier(7, true)), Some(StagedStep::Switch));
    assert_eq!(freezing.decide(5_999, &barrier(7, false)), None, "inside the window: wait");
    assert_eq!(freezing.decide(1_100, &barrier(6, true)), None, "a barrier on another version");
    match freezing.decide(6_000, &barrier(7, false)) {
        Some(StagedStep::Unfreeze { aborted: true, reason }) => {
            assert!(
                reason.contains("edge-1 (az-a, on v6)") && reason.contains("unchanged"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        switched.decide(1_300, &barrier(8, true)),
        Some(StagedStep::Unfreeze { aborted: false, .. })
    ));
    assert_eq!(switched.decide(1_300, &barrier(8, false)), None);
    assert_eq!(switched.decide(9_000, &barrier(7, true)), None, "the freeze's barrier is past");
    assert!(matches!(
        switched.decide(6_000, &barrier(8, false)),
        Some(StagedStep::Unfreeze { aborted: false, .. })
    ));
}

/// A pin of a user a release channel selects changes the owner of their writes of the channel's
/// services (pin > channel) even where the map gives them the pin's zone already: the loss-less
/// pin freezes their unit, and every write of it (the channel's service's too) is frozen until
/// the unfreeze. Unpinning gives those writes back to the channel, frozen the same way.
#[test]
fn a_pin_of_a_channel_user_freezes_their_unit_where_the_map_alone_would_not() {
    use tidegate_core::PinChange;
    const BLUE: ZoneId = ZoneId::BLUE;
    const GREEN: ZoneId = ZoneId::GREEN;
    let s =
        apply(&start(), Command::PutChannel { channel: channel("40-44", GREEN, &["orders"], &[]) })
            .unwrap();
    let user = unit_user(&s, 42); // blue by the map, green for `orders` by the channel
    let pin = |zone| Command::FreezeUnits {
        moves: vec![],
        pins: vec![PinChange { user_id: user.clone(), zone }],
        global: None,
        window_ms: 5_000,
    };
    let frozen = apply(&s, pin(Some(BLUE))).unwrap();
    assert_eq!(frozen.version(), s.version() + 1, "the pin to blue changes the orders owner");
    assert_eq!(frozen.table().frozen_in(None).map(ToString::to_string).as_deref(), Some("42"));
    let check = frozen.table().check_write_for(None, Some("orders"), &user, GREEN, None);
    assert!(matches!(check, Ok(Some(WriteCheck::Frozen { .. }))), "{check:?}");
    // Pinned to green, where the channel routes orders: the map's owner changes (blue ->
    // green), so the unit freezes as well; and a user the channel does not select, pinned to
    // its map zone, changes nothing.
    let other = unit_user(&s, 12);
    let same = Command::FreezeUnits {
        moves: vec![],
        pins: vec![PinChange { user_id: other, zone: Some(BLUE) }],
        global: None,
        window_ms: 5_000,
    };
    assert_eq!(apply(&s, same).unwrap().version(), s.version(), "no owner changes");
    let to_green = apply(&s, pin(Some(GREEN))).unwrap();
    assert_eq!(to_green.version(), s.version() + 1);
    // `State::pin_changes_owner`, the same rule, as the HTTP pin asks it before freezing.
    let change = |zone| PinChange { user_id: user.clone(), zone };
    assert!(s.pin_changes_owner(&change(Some(BLUE))).unwrap(), "orders moves to blue");
    assert!(s.pin_changes_owner(&change(Some(GREEN))).unwrap(), "the map's owner moves");
    // Pinned green (the channel's zone) in a table where the map gives green too: unpinning
    // changes no owner, for the map or for orders.
    let both_green = apply(
        &s,
        Command::MoveUnits {
            moves: vec![tidegate_core::UnitMove {
                units: UnitSet::parse("40-44", 100).unwrap(),
                zone: GREEN,
                domain: None,
            }],
        },
    )
    .unwrap();
    let pinned = apply(&both_green, Command::Pin { user_id: user.clone(), color: GREEN }).unwrap();
    assert!(!pinned.pin_changes_owner(&change(None)).unwrap(), "green before and after");
    assert!(pinned.pin_changes_owner(&change(Some(BLUE))).unwrap());
}
