//! The write contract between services one version apart: a correctly routed write to a callee
//! one version behind is `behind`, never `misrouted`; forwarding takes at most one hop, so two
//! stale services never bounce a write; writes routed at the newest version are committed only
//! by the owner at that version; `resolve` recomputes a tag propagated at an older version.

use std::collections::BTreeMap;

use tidegate_client::metrics::{CLIENT_MISROUTED, CLIENT_WRITE_CHECKS};
use tidegate_client::{
    COLOR_HEADER, HOP_HEADER, Router, Source, VERSION_HEADER, WriteCheck, WriteRoute, forward_once,
    resolve,
};
use tidegate_core::{RoutingTable, UnitMode, UnitScheme, UnitSet, ZoneId, Zones};

fn table(version: u64, blue_units: u32) -> RoutingTable {
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    RoutingTable::from_parts(version, scheme, blue_units, BTreeMap::new(), Zones::default())
        .unwrap()
}

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn a_correctly_routed_write_to_a_callee_one_version_behind_is_behind_never_misrouted() {
    let new = table(8, 40);
    let stale = Router::fixed(table(7, 50));
    let (mut behind, mut other) = (0, 0);
    for i in 0..10_000 {
        let user = format!("user-{i}");
        // The edge routed at version 8: the user's owner there is the callee's zone.
        let owner = new.tag(&user).unwrap().color;
        let answer = stale.check_write(&user, owner, Some(8)).unwrap();
        match answer.check {
            WriteCheck::Behind { incoming: 8, local: 7 } => behind += 1,
            _ => other += 1,
        }
        assert_eq!(answer.status(), Some(503));
        assert!(answer.retry_after().is_some());
    }
    println!("10000 writes routed at v8 to callees on v7: {behind} behind, {other} other");
    assert_eq!((behind, other), (10_000, 0));
}

#[test]
fn forwarding_never_ping_pongs_between_two_stale_services_over_10_000_writes() {
    // Three tables a move apart; each of the two services holds one of them at random, and the
    // caller propagates a version (or none) at random. 20-29 are frozen in the middle table.
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let frozen = BTreeMap::from([("default".to_owned(), UnitSet::parse("20-29", 100).unwrap())]);
    let tables = [
        table(5, 30),
        RoutingTable::from_parts(6, scheme, 30, BTreeMap::new(), Zones::default())
            .unwrap()
            .with_frozen(frozen)
            .unwrap(),
        table(7, 20),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut max_hops = 0;
    for i in 0..10_000 {
        let user = format!("user-{i}");
        let routers = [
            Router::fixed(tables[(rng.next() % 3) as usize].clone()),
            Router::fixed(tables[(rng.next() % 3) as usize].clone()),
        ];
        let zones = [ZoneId::BLUE, ZoneId::GREEN];
        let mut at = (rng.next() % 2) as usize;
        let mut version = match rng.next() % 4 {
            0 => None,
            n => Some(4 + n), // 5, 6 or 7
        };
        let mut hop: Option<String> = None;
        let mut hops = 0;
        let outcome = loop {
            let answer = routers[at].check_write(&user, zones[at], version).unwrap();
            match forward_once(&answer, hop.as_deref()) {
                WriteRoute::Write => {
                    // Committed here: this zone owns the user at a table at least as new as
                    // the caller's, and the user's unit is not frozen there.
                    let local = routers[at].table().unwrap();
                    assert!(version.is_none_or(|v| v <= local.version()));
                    assert_eq!(local.tag(&user).unwrap().color, zones[at]);
                    if let Some(v) = version
                        && v == 7
                    {
                        assert_eq!(tables[2].tag(&user).unwrap().color, zones[at], "{user}");
                    }
                    break "written";
                }
                WriteRoute::Forward { zone, lane, headers } => {
                    hops += 1;
                    assert_eq!(lane, answer.owner_lane);
                    assert!(zone == "az-a" || zone == "az-b", "{zone}");
                    let header = |name: &str| {
                        headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone())
                    };
                    assert_eq!(header(COLOR_HEADER).as_deref(), Some(lane.as_str()));
                    hop = header(HOP_HEADER);
                    version = header(VERSION_HEADER).and_then(|v| v.parse().ok());
                    at = 1 - at;
                }
                WriteRoute::Refuse { status: 421, .. } => break "refused_misrouted",
                WriteRoute::Refuse { status: 503, .. } => break "busy",
                WriteRoute::Refuse { status, .. } => panic!("unexpected status {status}"),
            }
        };
        assert!(hops <= 1, "{user} took {hops} hops");
        max_hops = max_hops.max(hops);
        *counts.entry(outcome).or_default() += 1;
    }
    println!("10000 writes between two services on random tables: {counts:?}, max hops {max_hops}");
    assert_eq!(max_hops, 1, "some write was forwarded (else the test proves nothing)");
    assert!(counts.get("refused_misrouted").copied().unwrap_or(0) > 0, "{counts:?}");
    assert!(counts.get("busy").copied().unwrap_or(0) > 0, "{counts:?}");
}

#[test]
fn resolve_recomputes_a_tag_propagated_at_an_older_version() {
    let router = Router::fixed(table(8, 40));
    // A user in units 40-49: blue at v7 (50 blue units), green at v8.
    let user = (0..100_000)
        .map(|i| format!("user-{i}"))
        .find(|u| (40..50).contains(&router.tag(u).unwrap().unit))
        .unwrap();
    let old = [(COLOR_HEADER, "blue"), (VERSION_HEADER, "7")];
    let header = |name: &str| old.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let resolved = resolve(&router, header, Some(&user)).unwrap();
    assert_eq!((resolved.source, resolved.lane.as_str()), (Source::Recomputed, "green"));
    assert_eq!(resolved.version, Some(8));
    // At the same version the propagated tag is kept; without a user ID it is kept too.
    let same = [(COLOR_HEADER, "blue"), (VERSION_HEADER, "8")];
    let header = |name: &str| same.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    assert_eq!(resolve(&router, header, Some(&user)).unwrap().source, Source::Propagated);
    let header = |name: &str| old.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    assert_eq!(resolve(&router, header, None).unwrap().source, Source::Propagated);
}

#[test]
fn writes_without_a_user_id_are_rejected_while_reads_fall_back_to_random() {
    let router = Router::fixed(table(3, 50));
    assert!(router.untagged().is_ok(), "reads take the random fallback");
    assert!(router.untagged_write().is_err(), "writes are rejected by default");
}

#[test]
fn every_write_check_is_counted_by_answer_and_misrouted_ones_by_owner_lane() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let router = Router::fixed(table(8, 40));
    let (mut owned, mut misrouted) = (0u64, 0u64);
    metrics::with_local_recorder(&recorder, || {
        for i in 0..1_000 {
            let user = format!("user-{i}");
            // Every write lands in the blue zone: the blue users are owned, the rest misrouted.
            match router.check_write(&user, ZoneId(0), Some(8)).unwrap().check {
                WriteCheck::Owned => owned += 1,
                WriteCheck::Misrouted { .. } => misrouted += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        // A caller one version ahead: behind.
        router.check_write("user-1", ZoneId(0), Some(9)).unwrap();
    });
    let text = handle.render();
    let value = |series: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    println!("1000 writes in blue at v8: {owned} owned, {misrouted} misrouted");
    assert!(owned > 300 && misrouted > 500, "{owned} {misrouted}");
    let checks = |answer: &str| format!("{CLIENT_WRITE_CHECKS}{{answer=\"{answer}\"}}");
    assert_eq!(value(&checks("owned")), owned);
    assert_eq!(value(&checks("misrouted")), misrouted);
    assert_eq!(value(&checks("behind")), 1);
    assert_eq!(value(&format!("{CLIENT_MISROUTED}{{color=\"green\"}}")), misrouted);
}
