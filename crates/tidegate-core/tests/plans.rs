//! Plan dry runs in pure code: load carried across steps, guard holds by mode, and the RTO.

use tidegate_core::{
    Capacity, CheckKind, DrainMode, DryRunInputs, Guard, OnBreach, Plan, PlanStep, Precondition,
    Reading, StepDefaults, Verdict, ZoneId, ZoneLoad, Zones, dry_run, validate_plan,
};

fn defaults(step_units: u32, interval_ms: u64) -> StepDefaults {
    StepDefaults {
        step_units,
        interval_ms,
        guard: Guard {
            max_error_rate: 0.05,
            min_requests: 10,
            breaches: 2,
            on_breach: OnBreach::Pause,
        },
    }
}

fn load(zone: &str, rps: f64, capacity: Capacity) -> ZoneLoad {
    ZoneLoad { zone: zone.into(), load_rps: Ok(rps), capacity, load_note: None }
}

fn plan(steps: Vec<PlanStep>, rto_ms: u64) -> Plan {
    Plan {
        name: "az-b-failing".into(),
        preconditions: vec![Precondition {
            name: "db".into(),
            check: CheckKind::Http("http://db/primary".into()),
        }],
        steps,
        rto_ms,
        trigger: None,
        freeze_ms: None,
    }
}

#[test]
fn later_steps_are_judged_against_the_load_earlier_steps_moved() {
    let zones = Zones::default();
    // az-b (blue) 50 units at 500 rps, az-a 500 rps with 1000 capacity and no headroom.
    let blue = load("az-b", 500.0, Capacity::Unchecked);
    let green = load("az-a", 500.0, Capacity::Rps(1000.0));
    let sick = Reading::Known { error_rate: 0.6, requests: 1000 };
    let fine = Reading::Known { error_rate: 0.0, requests: 1000 };
    let results = vec![("db".to_owned(), Ok(true))];
    let no_domains = std::collections::BTreeMap::new();
    let inputs = DryRunInputs {
        zones: &zones,
        units: 100,
        blue_units: 50,
        domain_blue_units: &no_domains,
        blue_load: &blue,
        green_load: &green,
        headroom: 0.0,
        blue_health: &sick,
        green_health: &fine,
        maintenance: defaults(10, 30_000),
        evacuate: defaults(25, 5_000),
        preconditions: &results,
        backlog: [Some(0), Some(0)],
        busy: None,
        channels: &[],
        unit_map: None,
        zone_loads: &[],
        domain_maps: &std::collections::BTreeMap::new(),
    };
    // Evacuating to 20 % moves 300 rps (fits: 800); the dial to 0 then adds the last 200: 1000
    // fits exactly; a maintenance drain of the sick zone would hold on its errors.
    let p = plan(
        vec![
            PlanStep::MoveZone {
                zone: "az-b".into(),
                to_percent: 20.0,
                mode: DrainMode::Evacuate,
                domain: None,
            },
            PlanStep::Dial { blue_percent: 0.0, domain: None },
            PlanStep::MoveZone {
                zone: "az-b".into(),
                to_percent: 10.0,
                mode: DrainMode::Maintenance,
                domain: None,
            },
        ],
        10_000,
    );
    validate_plan(&p, &zones, 100).unwrap();
    let run = dry_run(&p, &inputs);
    assert!(run.would_start(), "{:?}", run.refusals);
    let [evacuate, dial, drain] = &run.steps[..] else { panic!() };
    assert_eq!((evacuate.users_moved_percent, evacuate.expected_ms), (30.0, 5_000));
    let Verdict::Fits(p1) = &evacuate.capacity else { panic!("{:?}", evacuate.capacity) };
    assert_eq!(p1.projected_rps, 800.0);
    assert!(evacuate.holds.is_empty(), "{:?}", evacuate.holds);
    let Verdict::Fits(p2) = &dial.capacity else { panic!("{:?}", dial.capacity) };
    assert_eq!((p2.current_rps, p2.projected_rps), (800.0, 1000.0));
    // Restoring az-b to 10 % moves users into az-b (no capacity configured), and maintenance
    // judges both zones: az-b's errors hold it.
    assert_eq!(drain.capacity, Verdict::Unchecked);
    assert!(
        drain.holds.iter().any(|h| h.contains("az-b has an error rate of 60.00%")),
        "{:?}",
        drain.holds
    );
    assert_eq!(run.expected_ms, 5_000);
    assert!(run.fits_rto());

    let slow = plan(
        vec![PlanStep::MoveZone {
            zone: "az-b".into(),
            to_percent: 0.0,
            mode: DrainMode::Maintenance,
            domain: None,
        }],
        60_000,
    );
    let run = dry_run(&slow, &DryRunInputs { blue_health: &fine, ..inputs.clone() });
    assert_eq!(run.expected_ms, 4 * 30_000, "5 steps of 10 %, 30 s apart");
    assert!(!run.fits_rto());

    let refused = dry_run(
        &slow,
        &DryRunInputs {
            preconditions: &[("db".into(), Ok(false))],
            busy: Some("drain 3 is running".into()),
            ..inputs
        },
    );
    assert!(!refused.would_start());
    assert_eq!(
        refused.refusals,
        vec!["drain 3 is running".to_owned(), "precondition `db` is false".to_owned()]
    );
    let _ = ZoneId::BLUE;
}

#[test]
fn a_step_of_a_named_domain_moves_that_domains_dial_and_leaves_the_default_one() {
    let zones = Zones::default();
    let blue = load("az-b", 500.0, Capacity::Unchecked);
    let green = load("az-a", 500.0, Capacity::Unchecked);
    let fine = Reading::Known { error_rate: 0.0, requests: 1000 };
    let domains = std::collections::BTreeMap::from([("search".to_owned(), 20u32)]);
    let inputs = DryRunInputs {
        zones: &zones,
        units: 100,
        blue_units: 50,
        domain_blue_units: &domains,
        blue_load: &blue,
        green_load: &green,
        headroom: 0.0,
        blue_health: &fine,
        green_health: &fine,
        maintenance: defaults(10, 1_000),
        evacuate: defaults(50, 1_000),
        preconditions: &[("db".into(), Ok(true))],
        backlog: [Some(0), Some(0)],
        busy: None,
        channels: &[],
        unit_map: None,
        zone_loads: &[],
        domain_maps: &std::collections::BTreeMap::new(),
    };
    let dial = |percent: f64, domain: Option<&str>| PlanStep::Dial {
        blue_percent: percent,
        domain: domain.map(str::to_owned),
    };
    let p = plan(
        vec![
            dial(30.0, Some("search")),
            dial(40.0, None),
            // az-b is blue: draining it to 0 % of search's users takes search's 30 blue units.
            PlanStep::MoveZone {
                zone: "az-b".into(),
                to_percent: 0.0,
                mode: DrainMode::Maintenance,
                domain: Some("search".into()),
            },
            // `default` is the default domain by name.
            dial(45.0, Some("default")),
        ],
        60_000,
    );
    validate_plan(&p, &zones, 100).unwrap();
    let run = dry_run(&p, &inputs);
    let rows: Vec<(Option<&str>, f64, f64)> = run
        .steps
        .iter()
        .map(|s| (s.domain.as_deref(), s.blue_percent_before, s.blue_percent_after))
        .collect();
    assert_eq!(
        rows,
        vec![
            (Some("search"), 20.0, 30.0),
            (None, 50.0, 40.0),
            (Some("search"), 30.0, 0.0),
            (None, 40.0, 45.0),
        ]
    );
    assert!(run.steps[0].description.ends_with(" in search"), "{}", run.steps[0].description);
    assert!(!run.steps[3].description.contains(" in "), "{}", run.steps[3].description);
    assert_eq!(run.expected_ms, 2_000, "search's drain: 3 steps of 10 %, 1 s apart");
}

/// The dry run says what each dial step does to release channels: emptying a channel's zone
/// suspends it (with its fallback), giving the zone units back resumes it; a channel of another
/// domain is untouched.
#[test]
fn the_dry_run_says_which_channels_a_step_suspends_and_resumes() {
    use tidegate_core::{ChannelFallback, ChannelSpec};
    let zones = Zones::default();
    let blue = load("az-b", 500.0, Capacity::Unchecked);
    let green = load("az-a", 500.0, Capacity::Unchecked);
    let fine = Reading::Known { error_rate: 0.0, requests: 1000 };
    let channel = |name: &str, zone: ZoneId, domain: Option<&str>, fallback| {
        ChannelSpec {
            name: name.into(),
            domain: domain.map(str::to_owned),
            services: vec!["orders".into()],
            zone,
            percent: Some(10.0),
            units: None,
            users: Vec::new(),
            fallback,
            expires_at_ms: None,
        }
        .resolve(100, 0)
        .unwrap()
    };
    let channels = vec![
        channel("orders-v2", ZoneId::GREEN, None, ChannelFallback::Reject),
        channel("search-v2", ZoneId::GREEN, Some("search"), ChannelFallback::Global),
    ];
    let domains = std::collections::BTreeMap::from([("search".to_owned(), 50u32)]);
    let inputs = DryRunInputs {
        zones: &zones,
        units: 100,
        blue_units: 50,
        domain_blue_units: &domains,
        blue_load: &blue,
        green_load: &green,
        headroom: 0.0,
        blue_health: &fine,
        green_health: &fine,
        maintenance: defaults(10, 1_000),
        evacuate: defaults(50, 1_000),
        preconditions: &[("db".into(), Ok(true))],
        backlog: [Some(0), Some(0)],
        busy: None,
        channels: &channels,
        unit_map: None,
        zone_loads: &[],
        domain_maps: &std::collections::BTreeMap::new(),
    };
    let dial = |percent: f64| PlanStep::Dial { blue_percent: percent, domain: None };
    let run = dry_run(&plan(vec![dial(80.0), dial(100.0), dial(60.0)], 60_000), &inputs);
    let notes: Vec<&[String]> = run.steps.iter().map(|s| s.channels.as_slice()).collect();
    assert!(notes[0].is_empty(), "az-a keeps units at 80% blue: {notes:?}");
    assert_eq!(notes[1].len(), 1, "{notes:?}");
    assert!(notes[1][0].starts_with("suspends channel orders-v2"), "{}", notes[1][0]);
    assert!(notes[1][0].contains("az-a") && notes[1][0].contains("`reject`"), "{}", notes[1][0]);
    assert_eq!(notes[2].len(), 1, "{notes:?}");
    assert!(notes[2][0].starts_with("resumes channel orders-v2"), "{}", notes[2][0]);
    // Control: the same steps in another domain leave the default domain's channel alone.
    let in_search =
        |percent: f64| PlanStep::Dial { blue_percent: percent, domain: Some("search".into()) };
    let run = dry_run(&plan(vec![in_search(100.0)], 60_000), &inputs);
    assert_eq!(run.steps[0].channels.len(), 1, "{:?}", run.steps[0].channels);
    assert!(run.steps[0].channels[0].starts_with("suspends channel search-v2"));
}

/// az-b (blue), az-a (green), az-c (red).
fn three_zones() -> Zones {
    use tidegate_core::{ZoneClass, ZoneSpec};
    Zones::from_specs(vec![
        ZoneSpec::new("az-b", "blue", ZoneClass::Rzone),
        ZoneSpec::new("az-a", "green", ZoneClass::Rzone),
        ZoneSpec::new("az-c", "red", ZoneClass::Rzone),
    ])
    .unwrap()
}

/// A `move_units` step is projected per receiving zone on three zones, as `PUT /v1/units` judges
/// a move, and a later step is judged against the load an earlier one moved there: units 0-9
/// of az-b (50 units at 500 rps) add 100 rps to az-c (100 rps, 250 allowed) and fit; 10-19 then
/// bring az-c to 300 rps and the step holds, naming az-c. Control: without per-zone loads the
/// dry run says it does not project the move.
#[test]
fn unit_moves_are_projected_per_receiving_zone_and_carry_their_load() {
    use tidegate_core::{PlanMove, UnitMap, UnitSet};
    let zones = three_zones();
    // az-b 0-49, az-a 50-89, az-c 90-99.
    let map = UnitMap::dial(100, 50).moved(&UnitSet::parse("90-99", 100).unwrap(), ZoneId(2));
    let loads = vec![
        load("az-b", 500.0, Capacity::Unchecked),
        load("az-a", 400.0, Capacity::Rps(1000.0)),
        load("az-c", 100.0, Capacity::Rps(250.0)),
    ];
    let fine = Reading::Known { error_rate: 0.0, requests: 1000 };
    let no_domains = std::collections::BTreeMap::new();
    let inputs = DryRunInputs {
        zones: &zones,
        units: 100,
        blue_units: 50,
        domain_blue_units: &no_domains,
        blue_load: &loads[0],
        green_load: &loads[1],
        headroom: 0.0,
        blue_health: &fine,
        green_health: &fine,
        maintenance: defaults(10, 1_000),
        evacuate: defaults(25, 1_000),
        preconditions: &[("db".into(), Ok(true))],
        backlog: [Some(0), Some(0)],
        busy: None,
        channels: &[],
        unit_map: Some(&map),
        zone_loads: &loads,
        domain_maps: &std::collections::BTreeMap::new(),
    };
    let give = |units: &str| PlanStep::MoveUnits {
        moves: vec![PlanMove {
            units: UnitSet::parse(units, 100).unwrap(),
            zone: "az-c".into(),
            domain: None,
        }],
    };
    let run = dry_run(&plan(vec![give("0-9"), give("10-19")], 60_000), &inputs);
    let projected = |i: usize| match &run.steps[i].capacity {
        Verdict::Fits(p) | Verdict::Exceeds(p) => (p.zone.clone(), p.projected_rps),
        other => panic!("step {i}: {other:?}"),
    };
    assert!(matches!(run.steps[0].capacity, Verdict::Fits(_)), "{:?}", run.steps[0]);
    assert_eq!(projected(0), ("az-c".to_owned(), 200.0));
    assert!(matches!(run.steps[1].capacity, Verdict::Exceeds(_)), "{:?}", run.steps[1]);
    assert_eq!(projected(1), ("az-c".to_owned(), 300.0), "the first step's 100 rps carried");
    assert!(
        run.steps[1]
            .holds
            .iter()
            .any(|h| h.contains("insufficient_capacity") && h.contains("az-c")),
        "{:?}",
        run.steps[1].holds
    );
    // Control: no per-zone loads, no projection.
    let blind = DryRunInputs { unit_map: None, zone_loads: &[], ..inputs.clone() };
    let run = dry_run(&plan(vec![give("0-9"), give("10-19")], 60_000), &blind);
    assert!(matches!(run.steps[1].capacity, Verdict::Unchecked));
    assert!(run.steps[1].holds.iter().any(|h| h.contains("does not project")));
}

/// A `drain` step among three zones is projected as the zone drain runs it: az-c's 40 units
/// (400 rps) spread over az-b and az-a by free room. With 300 + 100 rps free they fit exactly;
/// with 300 + 50 free the 400 rps cannot fit anywhere and the step holds on capacity.
#[test]
fn a_zone_drain_among_three_is_projected_by_free_room() {
    use tidegate_core::{UnitMap, UnitSet};
    let zones = three_zones();
    let map = UnitMap::dial(100, 30).moved(&UnitSet::parse("60-99", 100).unwrap(), ZoneId(2));
    let fine = Reading::Known { error_rate: 0.0, requests: 1000 };
    let no_domains = std::collections::BTreeMap::new();
    let project = |az_a_capacity: f64| {
        let loads = vec![
            load("az-b", 500.0, Capacity::Rps(800.0)),
            load("az-a", 500.0, Capacity::Rps(az_a_capacity)),
            load("az-c", 400.0, Capacity::Unchecked),
        ];
        let inputs = DryRunInputs {
            zones: &zones,
            units: 100,
            blue_units: 30,
            domain_blue_units: &no_domains,
            blue_load: &loads[0],
            green_load: &loads[1],
            headroom: 0.0,
            blue_health: &fine,
            green_health: &fine,
            maintenance: defaults(10, 1_000),
            evacuate: defaults(25, 1_000),
            preconditions: &[("db".into(), Ok(true))],
            backlog: [Some(0), Some(0)],
            busy: None,
            channels: &[],
            unit_map: Some(&map),
            zone_loads: &loads,
            domain_maps: &std::collections::BTreeMap::new(),
        };
        let step = PlanStep::MoveZone {
            zone: "az-c".into(),
            to_percent: 0.0,
            mode: DrainMode::Maintenance,
            domain: None,
        };
        dry_run(&plan(vec![step], 60_000), &inputs).steps.remove(0)
    };
    let roomy = project(600.0);
    assert!(matches!(roomy.capacity, Verdict::Fits(_)), "{roomy:?}");
    assert_eq!(roomy.users_moved_percent, 40.0);
    let tight = project(550.0);
    assert!(matches!(tight.capacity, Verdict::Exceeds(_)), "{tight:?}");
    assert!(tight.holds.iter().any(|h| h.contains("insufficient_capacity")), "{:?}", tight.holds);
}

/// Channel load in projections: units a release channel keeps in its zone carry no load when
/// the map moves them, so the source zone's load is spread over the units it really serves.
/// On two zones: az-b serves 500 rps on 40 of its 50 units (channel `orders-v2` keeps 40-49 in
/// az-a), so the dial to 30 % moves units 30-49 of which only 30-39 carry load: 125 rps, not 200.
/// Among three zones: `move_units` 0-19 to az-c, with a channel keeping 0-9 in az-a. Each
/// projection has its control: without the channel, the same step exceeds.
#[test]
fn projections_leave_channel_users_where_their_channel_keeps_them() {
    use tidegate_core::{ChannelFallback, ChannelSpec, PlanMove, UnitMap, UnitSet};
    let channel = |units: &str, zone: ZoneId| {
        ChannelSpec {
            name: "orders-v2".into(),
            domain: None,
            services: vec!["orders".into()],
            zone,
            percent: None,
            units: Some(UnitSet::parse(units, 100).unwrap()),
            users: Vec::new(),
            fallback: ChannelFallback::Global,
            expires_at_ms: None,
        }
        .resolve(100, 0)
        .unwrap()
    };
    let fine = Reading::Known { error_rate: 0.0, requests: 1000 };
    let no_domains = std::collections::BTreeMap::new();
    let projected = |v: &Verdict| match v {
        Verdict::Fits(p) | Verdict::Exceeds(p) => (p.zone.clone(), p.projected_rps, v.blocks()),
        other => panic!("{other:?}"),
    };

    // Two zones.
    let zones = Zones::default();
    let blue = load("az-b", 500.0, Capacity::Unchecked);
    let green = load("az-a", 500.0, Capacity::Rps(650.0));
    let map = UnitMap::dial(100, 50);
    let dial = |channels: &[tidegate_core::Channel]| {
        let inputs = DryRunInputs {
            zones: &zones,
            units: 100,
            blue_units: 50,
            domain_blue_units: &no_domains,
            blue_load: &blue,
            green_load: &green,
            headroom: 0.0,
            blue_health: &fine,
            green_health: &fine,
            maintenance: defaults(10, 1_000),
            evacuate: defaults(25, 1_000),
            preconditions: &[("db".into(), Ok(true))],
            backlog: [Some(0), Some(0)],
            busy: None,
            channels,
            unit_map: Some(&map),
            zone_loads: &[],
            domain_maps: &std::collections::BTreeMap::new(),
        };
        let step = PlanStep::Dial { blue_percent: 30.0, domain: None };
        dry_run(&plan(vec![step], 60_000), &inputs).steps.remove(0).capacity
    };
    assert_eq!(projected(&dial(&[channel("40-49", ZoneId::GREEN)])), ("az-a".into(), 625.0, false));
    assert_eq!(projected(&dial(&[])), ("az-a".into(), 700.0, true), "control: no channel");

    // Three zones: az-b 0-49, az-a 50-89, az-c 90-99 (100 rps of 250).
    let zones = three_zones();
    let map = UnitMap::dial(100, 50).moved(&UnitSet::parse("90-99", 100).unwrap(), ZoneId(2));
    let loads = vec![
        load("az-b", 500.0, Capacity::Unchecked),
        load("az-a", 400.0, Capacity::Rps(1000.0)),
        load("az-c", 100.0, Capacity::Rps(250.0)),
    ];
    let give = |channels: &[tidegate_core::Channel]| {
        let inputs = DryRunInputs {
            zones: &zones,
            units: 100,
            blue_units: 50,
            domain_blue_units: &no_domains,
            blue_load: &loads[0],
            green_load: &loads[1],
            headroom: 0.0,
            blue_health: &fine,
            green_health: &fine,
            maintenance: defaults(10, 1_000),
            evacuate: defaults(25, 1_000),
            preconditions: &[("db".into(), Ok(true))],
            backlog: [Some(0), Some(0)],
            busy: None,
            channels,
            unit_map: Some(&map),
            zone_loads: &loads,
            domain_maps: &std::collections::BTreeMap::new(),
        };
        let step = PlanStep::MoveUnits {
            moves: vec![PlanMove {
                units: UnitSet::parse("0-19", 100).unwrap(),
                zone: "az-c".into(),
                domain: None,
            }],
        };
        dry_run(&plan(vec![step], 60_000), &inputs).steps.remove(0).capacity
    };
    assert_eq!(projected(&give(&[channel("0-9", ZoneId(1))])), ("az-c".into(), 225.0, false));
    assert_eq!(projected(&give(&[])), ("az-c".into(), 300.0, true), "control: no channel");
}

/// A `move_units` step's moves in a named domain are projected on that domain's map, as
/// `PUT /v1/units` judges them: the source zone's load per unit of that domain. In `search`,
/// az-b owns 30 units for its 500 rps, so 0-9 to az-c adds about 167 rps (az-c 267 of 250). In
/// the default domain the same units would add 100 (az-b owns 50 there). Control: without the
/// domain's map the step is judged when it runs.
#[test]
fn unit_moves_in_a_named_domain_are_projected_on_that_domains_map() {
    use tidegate_core::{PlanMove, UnitMap, UnitSet};
    let zones = three_zones();
    let az_c = |m: UnitMap| m.moved(&UnitSet::parse("90-99", 100).unwrap(), ZoneId(2));
    let map = az_c(UnitMap::dial(100, 50));
    let search =
        std::collections::BTreeMap::from([("search".to_owned(), az_c(UnitMap::dial(100, 30)))]);
    let loads = vec![
        load("az-b", 500.0, Capacity::Unchecked),
        load("az-a", 400.0, Capacity::Rps(1000.0)),
        load("az-c", 100.0, Capacity::Rps(250.0)),
    ];
    let fine = Reading::Known { error_rate: 0.0, requests: 1000 };
    let no_domains = std::collections::BTreeMap::new();
    let run = |domain_maps: &std::collections::BTreeMap<String, UnitMap>, domain: Option<&str>| {
        let inputs = DryRunInputs {
            zones: &zones,
            units: 100,
            blue_units: 50,
            domain_blue_units: &no_domains,
            blue_load: &loads[0],
            green_load: &loads[1],
            headroom: 0.0,
            blue_health: &fine,
            green_health: &fine,
            maintenance: defaults(10, 1_000),
            evacuate: defaults(25, 1_000),
            preconditions: &[("db".into(), Ok(true))],
            backlog: [Some(0), Some(0)],
            busy: None,
            channels: &[],
            unit_map: Some(&map),
            zone_loads: &loads,
            domain_maps,
        };
        let step = PlanStep::MoveUnits {
            moves: vec![PlanMove {
                units: UnitSet::parse("0-9", 100).unwrap(),
                zone: "az-c".into(),
                domain: domain.map(str::to_owned),
            }],
        };
        dry_run(&plan(vec![step], 60_000), &inputs).steps.remove(0)
    };
    let step = run(&search, Some("search"));
    match &step.capacity {
        Verdict::Exceeds(p) => {
            assert_eq!(p.zone, "az-c");
            assert!((p.projected_rps - (100.0 + 500.0 * 10.0 / 30.0)).abs() < 0.01, "{p:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(step.holds.iter().any(|h| h.contains("insufficient_capacity")), "{:?}", step.holds);
    // The same units of the default domain: 100 rps, it fits.
    assert!(matches!(run(&search, None).capacity, Verdict::Fits(_)));
    // Control: the domain's map unknown.
    let blind = run(&std::collections::BTreeMap::new(), Some("search"));
    assert!(matches!(blind.capacity, Verdict::Unchecked), "{blind:?}");
    assert!(
        blind.holds.iter().any(|h| h.contains("judged when the step runs")),
        "{:?}",
        blind.holds
    );
}

/// A zone move among three zones in a named domain is projected on that domain's map: in
/// `search` az-c owns 40 units, so draining it to 20 % moves 20 of them (200 rps of its 400);
/// the default domain's az-c owns 10, where the same step would fail (control).
#[test]
fn a_zone_move_in_a_named_domain_is_projected_on_that_domains_map() {
    use tidegate_core::{UnitMap, UnitSet};
    let zones = three_zones();
    let az_c = |m: UnitMap, units: &str| m.moved(&UnitSet::parse(units, 100).unwrap(), ZoneId(2));
    let map = az_c(UnitMap::dial(100, 50), "90-99");
    let search = std::collections::BTreeMap::from([(
        "search".to_owned(),
        az_c(UnitMap::dial(100, 30), "60-99"),
    )]);
    let loads = vec![
        load("az-b", 500.0, Capacity::Rps(800.0)),
        load("az-a", 500.0, Capacity::Rps(800.0)),
        load("az-c", 400.0, Capacity::Unchecked),
    ];
    let fine = Reading::Known { error_rate: 0.0, requests: 1000 };
    let no_domains = std::collections::BTreeMap::new();
    let inputs = DryRunInputs {
        zones: &zones,
        units: 100,
        blue_units: 50,
        domain_blue_units: &no_domains,
        blue_load: &loads[0],
        green_load: &loads[1],
        headroom: 0.0,
        blue_health: &fine,
        green_health: &fine,
        maintenance: defaults(10, 1_000),
        evacuate: defaults(25, 1_000),
        preconditions: &[("db".into(), Ok(true))],
        backlog: [Some(0), Some(0)],
        busy: None,
        channels: &[],
        unit_map: Some(&map),
        zone_loads: &loads,
        domain_maps: &search,
    };
    let step = |domain: Option<&str>| {
        let step = PlanStep::MoveZone {
            zone: "az-c".into(),
            to_percent: 20.0,
            mode: DrainMode::Maintenance,
            domain: domain.map(str::to_owned),
        };
        dry_run(&plan(vec![step], 60_000), &inputs).steps.remove(0)
    };
    let in_search = step(Some("search"));
    assert_eq!(in_search.users_moved_percent, 20.0, "{in_search:?}");
    match &in_search.capacity {
        Verdict::Fits(p) => assert!(p.projected_rps <= 800.0, "{p:?}"),
        other => panic!("{other:?}"),
    }
    let in_default = step(None);
    assert_eq!(in_default.users_moved_percent, 0.0, "{in_default:?}");
    assert!(
        in_default.holds.iter().any(|h| h.starts_with("would fail: az-c owns 10 units")),
        "{:?}",
        in_default.holds
    );
}
