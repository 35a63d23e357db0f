//! Lane membership in virtual time (`lanes::Lanes`) and over HTTP (`/v1/lanes`): registration,
//! heartbeats, session timeout, commit-safe handover, drained zones and lag, and the API errors.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rocket::http::{ContentType, Header, Status};
use serde_json::{Value, json};
use tidegate::config::LanesConfig;
use tidegate::core::{RoutingTable, UnitMode, UnitScheme, ZoneId, Zones};
use tidegate::service::lane_membership::{Lanes, LanesError, PartitionOffsets, Registration};

fn table(version: u64, blue_units: u32) -> RoutingTable {
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    RoutingTable::from_parts(version, scheme, blue_units, BTreeMap::new(), Zones::default())
        .unwrap()
}

fn service() -> (Lanes, Arc<ArcSwap<RoutingTable>>) {
    let source = Arc::new(ArcSwap::from_pointee(table(1, 50)));
    let config = LanesConfig {
        session_timeout_ms: 1000,
        heartbeat_interval_ms: 200,
        lag_interval_ms: 200,
        kafka_bootstrap: None,
        max_groups: 4,
        max_members: 8,
        member_key: None,
        previous_member_key: None,
        max_groups_per_caller: 4,
        max_members_per_caller: 100,
        lease_ms: 400,
    };
    let lanes = Lanes::new(Zones::default(), config, source.clone(), None);
    (lanes, source)
}

fn reg(id: &str, zone: &str) -> Registration {
    Registration {
        member_id: Some(id.into()),
        owner: "service:test".into(),
        zone: zone.into(),
        topic: "orders".into(),
        partitions: 8,
    }
}

fn set(parts: &[u32]) -> BTreeSet<u32> {
    parts.iter().copied().collect()
}

#[test]
fn each_zone_reads_its_own_half() {
    let (lanes, _) = service();
    let b = lanes.register("g", reg("b1", "az-b"), 0).unwrap();
    assert_eq!(b.assignment, vec![0, 1, 2, 3, 4, 5, 6, 7], "alone, b1 reads everything");
    let a = lanes.register("g", reg("a1", "az-a"), 10).unwrap();
    assert_eq!(a.assignment, Vec::<u32>::new(), "b1 has not released the green half yet");
    assert_eq!(a.pending, vec![4, 5, 6, 7]);
    // b1 learns it lost the green half; it still holds it until it has committed.
    let b = lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3, 4, 5, 6, 7]), None, 20).unwrap();
    assert_eq!(b.assignment, vec![0, 1, 2, 3]);
    let a = lanes.heartbeat("g", "a1", set(&[]), None, 30).unwrap();
    assert!(a.assignment.is_empty(), "still held by b1");
    // b1 committed and released.
    lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3]), None, 40).unwrap();
    let a = lanes.heartbeat("g", "a1", set(&[]), None, 50).unwrap();
    assert_eq!(a.assignment, vec![4, 5, 6, 7]);
    let view = lanes.view("g", 60).unwrap();
    assert!(view.generation >= 3, "generation grows with every change: {}", view.generation);
    let before = view.generation;
    lanes.heartbeat("g", "a1", set(&[4, 5, 6, 7]), None, 70).unwrap();
    lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3]), None, 80).unwrap();
    assert_eq!(
        lanes.view("g", 90).unwrap().generation,
        before,
        "nothing changed, no new generation"
    );
}

#[test]
fn a_dead_zone_hands_its_half_over_after_the_session_timeout() {
    let (lanes, _) = service();
    lanes.register("g", reg("b1", "az-b"), 0).unwrap();
    lanes.register("g", reg("a1", "az-a"), 0).unwrap();
    lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3, 4, 5, 6, 7]), None, 100).unwrap();
    lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3]), None, 200).unwrap();
    let a = lanes.heartbeat("g", "a1", set(&[]), None, 300).unwrap();
    assert_eq!(a.assignment, vec![4, 5, 6, 7]);
    // b1 goes silent. Within the timeout, its half waits for it.
    let a = lanes.heartbeat("g", "a1", set(&[4, 5, 6, 7]), None, 1100).unwrap();
    assert_eq!(a.assignment, vec![4, 5, 6, 7]);
    // Past it, b1 is dead and a1 gets the blue half too.
    let a = lanes.heartbeat("g", "a1", set(&[4, 5, 6, 7]), None, 1300).unwrap();
    assert_eq!(a.assignment, (0..8).collect::<Vec<_>>());
    let view = lanes.view("g", 1300).unwrap();
    let blue = view.zones.iter().find(|z| z.color == ZoneId::BLUE).unwrap();
    assert_eq!(blue.state, "down");
    // The dead member is told so and must register again.
    let err = lanes.heartbeat("g", "b1", set(&[]), None, 1400).unwrap_err();
    assert!(matches!(err, LanesError::MemberNotFound { .. }), "{err:?}");
}

fn offsets(lags: [i64; 8]) -> Vec<PartitionOffsets> {
    (0..8)
        .map(|p| PartitionOffsets {
            partition: p,
            low: 0,
            high: 100,
            committed: Some(100 - lags[p as usize]),
        })
        .collect()
}

#[test]
fn a_drained_zone_keeps_its_half_until_the_lag_is_zero() {
    let (lanes, source) = service();
    lanes.register("g", reg("b1", "az-b"), 0).unwrap();
    lanes.register("g", reg("a1", "az-a"), 0).unwrap();
    lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3, 4, 5, 6, 7]), None, 10).unwrap();
    lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3]), None, 20).unwrap();
    lanes.heartbeat("g", "a1", set(&[]), None, 30).unwrap();
    assert_eq!(lanes.half_lag("g", ZoneId::BLUE), None, "no reading yet");
    // The dial moves every user to green: az-b (blue) is drained, with a backlog.
    source.store(Arc::new(table(2, 0)));
    lanes.tick(100);
    lanes.record_lag("g", Ok(offsets([5, 0, 3, 0, 0, 0, 0, 0])), 150);
    assert_eq!(lanes.half_lag("g", ZoneId::BLUE), Some(8));
    assert_eq!(lanes.half_lag("g", ZoneId::GREEN), Some(0));
    assert_eq!(lanes.total_half_lag(ZoneId::BLUE, 0, 500), Some(8));
    let b = lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3]), None, 200).unwrap();
    assert_eq!(b.assignment, vec![0, 1, 2, 3], "b1 finishes its backlog first");
    let view = lanes.view("g", 200).unwrap();
    let blue = view.zones.iter().find(|z| z.color == ZoneId::BLUE).unwrap();
    assert_eq!((blue.state, blue.lag), ("drained", Some(8)));
    // Backlog consumed and committed: b1 gets nothing, a1 takes the (now quiet) blue half.
    lanes.record_lag("g", Ok(offsets([0; 8])), 300);
    let b = lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3]), None, 310).unwrap();
    assert!(b.assignment.is_empty());
    lanes.heartbeat("g", "b1", set(&[]), None, 320).unwrap();
    let a = lanes.heartbeat("g", "a1", set(&[4, 5, 6, 7]), None, 330).unwrap();
    assert_eq!(a.assignment, (0..8).collect::<Vec<_>>());
    // A failed read makes the lag unknown rather than stale.
    lanes.record_lag("g", Err("broker down".into()), 400);
    assert_eq!(lanes.half_lag("g", ZoneId::BLUE), None);
    assert_eq!(lanes.total_half_lag(ZoneId::BLUE, 0, 500), None);
}

#[test]
fn a_zero_lag_read_before_the_drain_does_not_count() {
    let (lanes, source) = service();
    lanes.register("g", reg("b1", "az-b"), 0).unwrap();
    lanes.register("g", reg("a1", "az-a"), 0).unwrap();
    lanes.record_lag("g", Ok(offsets([0; 8])), 50);
    source.store(Arc::new(table(2, 0)));
    lanes.tick(100);
    let b = lanes.heartbeat("g", "b1", set(&[0, 1, 2, 3, 4, 5, 6, 7]), None, 110).unwrap();
    assert_eq!(b.assignment, vec![0, 1, 2, 3], "only a reading after the drain may end it");
}

#[test]
fn a_zero_lag_read_before_the_emptying_step_does_not_complete_a_drain() {
    let (lanes, source) = service();
    lanes.register("g", reg("b1", "az-b"), 0).unwrap();
    lanes.record_lag("g", Ok(offsets([0; 8])), 50);
    // The step to 0 % blue is logged at 100; the lanes loop has not ticked since, so it has not
    // seen the share at 0 yet. The zero read at 50 predates messages produced until 100.
    source.store(Arc::new(table(2, 0)));
    assert_eq!(lanes.total_half_lag(ZoneId::BLUE, 100, 120), None);
    // A read started after the step (and after the lanes loop saw the share at 0) counts.
    lanes.tick(110);
    assert_eq!(lanes.total_half_lag(ZoneId::BLUE, 100, 120), None);
    lanes.record_lag("g", Ok(offsets([0; 8])), 130);
    assert_eq!(lanes.total_half_lag(ZoneId::BLUE, 100, 140), Some(0));
}

struct Quiet;

impl tidegate::service::lane_membership::LagSource for Quiet {
    fn read(&self, _: &str, _: &str, partitions: u32) -> Result<Vec<PartitionOffsets>, String> {
        Ok((0..partitions)
            .map(|partition| PartitionOffsets { partition, low: 0, high: 0, committed: None })
            .collect())
    }
}

#[test]
fn no_groups_right_after_a_restart_is_not_a_backlog_of_zero() {
    let source = Arc::new(ArcSwap::from_pointee(table(1, 0)));
    let config = LanesConfig {
        session_timeout_ms: 1000,
        heartbeat_interval_ms: 200,
        lag_interval_ms: 200,
        kafka_bootstrap: Some("127.0.0.1:9092".into()),
        max_groups: 4,
        max_members: 8,
        member_key: None,
        previous_member_key: None,
        max_groups_per_caller: 4,
        max_members_per_caller: 100,
        lease_ms: 400,
    };
    let lanes = Lanes::new(Zones::default(), config, source, Some(Arc::new(Quiet)));
    assert_eq!(lanes.total_half_lag(ZoneId::BLUE, 0, 5_000), None, "not even ticked yet");
    lanes.tick(5_000);
    // The consumers of before the restart have one session timeout to register again.
    assert_eq!(lanes.total_half_lag(ZoneId::BLUE, 0, 5_500), None);
    assert_eq!(lanes.total_half_lag(ZoneId::BLUE, 0, 6_000), Some(0));
}

#[test]
fn registrations_are_checked() {
    let (lanes, _) = service();
    let odd = Registration { partitions: 7, ..reg("x", "az-a") };
    let err = lanes.register("g", odd, 0).unwrap_err();
    assert!(err.to_string().contains("even"), "{err}");
    let err = lanes.register("g", reg("x", "az-q"), 0).unwrap_err();
    assert!(matches!(err, LanesError::UnknownZone { .. }), "{err:?}");
    let err = lanes.register("bad group!", reg("x", "az-a"), 0).unwrap_err();
    assert!(matches!(err, LanesError::InvalidName { .. }), "{err:?}");
    lanes.register("g", reg("x", "az-a"), 0).unwrap();
    let other = Registration { partitions: 4, ..reg("y", "az-a") };
    let err = lanes.register("g", other, 0).unwrap_err();
    assert!(matches!(err, LanesError::GroupMismatch { .. }), "{err:?}");
    for i in 0..7 {
        lanes.register("g", reg(&format!("m{i}"), "az-a"), 0).unwrap();
    }
    let err = lanes.register("g", reg("m9", "az-a"), 0).unwrap_err();
    assert!(matches!(err, LanesError::TooManyMembers { .. }), "{err:?}");
    let err = lanes.heartbeat("g", "x", set(&[8]), None, 0).unwrap_err();
    assert!(matches!(err, LanesError::BadHolding { .. }), "{err:?}");
}

#[test]
fn leaving_releases_at_once() {
    let (lanes, _) = service();
    lanes.register("g", reg("a1", "az-a"), 0).unwrap();
    lanes.register("g", reg("a2", "az-a"), 0).unwrap();
    lanes.heartbeat("g", "a1", set(&[0, 1, 2, 3, 4, 5, 6, 7]), None, 10).unwrap();
    lanes.leave("g", "a1", 20).unwrap();
    let a2 = lanes.heartbeat("g", "a2", set(&[]), None, 30).unwrap();
    assert_eq!(a2.assignment, (0..8).collect::<Vec<_>>());
    lanes.leave("g", "a2", 40).unwrap();
    assert!(matches!(lanes.view("g", 50), Err(LanesError::GroupNotFound(_))));
}

#[test]
fn a_single_node_does_not_adopt_unknown_members_after_a_restart() {
    use tidegate::service::lane_membership::Adoption;
    let (lanes, _) = service();
    let adopt = Adoption {
        owner: "service:test".into(),
        zone: "az-b".into(),
        topic: "orders".into(),
        partitions: 8,
    };
    // Unchanged single-node rule: a member this coordinator does not know registers again,
    // even when its heartbeat says what it reads (adoption is for replicas of a shared log).
    let err = lanes.heartbeat("g", "b1", set(&[0, 1]), Some(adopt), 0).unwrap_err();
    assert!(matches!(err, LanesError::MemberNotFound { .. }), "{err:?}");
}

// ---- HTTP ------------------------------------------------------------------------------------

fn body(response: rocket::local::blocking::LocalResponse<'_>) -> Value {
    serde_json::from_str(&response.into_string().unwrap()).unwrap()
}

#[test]
fn the_http_api_registers_heartbeats_and_shows_the_group() {
    let (client, _dir) = common::client();
    let auth = Header::new("Authorization", format!("Bearer {}", common::OPERATOR_TOKEN));
    let r = client
        .post("/v1/lanes/orders-g/members")
        .header(ContentType::JSON)
        .header(auth.clone())
        .body(json!({"name": "b1", "zone": "az-b", "topic": "orders", "partitions": 4}).to_string())
        .dispatch();
    assert_eq!(r.status(), Status::Created);
    let v = body(r);
    assert_eq!(v["assignment"], json!([0, 1, 2, 3]));
    let b1 = v["member_id"].as_str().unwrap().to_owned();
    assert!(b1.starts_with("b1-") && b1.len() == "b1-".len() + 16, "{b1}");
    let secret =
        Header::new("X-Tidegate-Member-Secret", v["member_secret"].as_str().unwrap().to_owned());
    assert!(v["heartbeat_interval_ms"].as_u64().unwrap() > 0);

    let r = client
        .post(format!("/v1/lanes/orders-g/members/{b1}/heartbeat"))
        .header(ContentType::JSON)
        .header(auth.clone())
        .header(secret.clone())
        .body(json!({"holding": [0, 1, 2, 3]}).to_string())
        .dispatch();
    assert_eq!(r.status(), Status::Ok);
    assert_eq!(body(r)["assignment"], json!([0, 1, 2, 3]));

    let v = body(client.get("/v1/lanes/orders-g").dispatch());
    assert_eq!(v["topic"], "orders");
    assert_eq!(v["partitions"], 4);
    assert_eq!(v["members"][0]["holding"], json!([0, 1, 2, 3]));
    assert_eq!(v["zones"][0]["color"], "blue");
    assert_eq!(v["zones"][0]["half"], json!([0, 1]));
    assert_eq!(v["zones"][1]["state"], "down", "no green consumer: az-a is down for this group");
    assert!(v["lag"].is_null(), "no Kafka configured: lag unknown");
    assert!(v["generation"].as_u64().unwrap() >= 1);
    let all = body(client.get("/v1/lanes").dispatch());
    assert_eq!(all["groups"].as_array().unwrap().len(), 1);
    assert_eq!(all["reads_lag"], false);

    let r = client
        .delete(format!("/v1/lanes/orders-g/members/{b1}"))
        .header(auth.clone())
        .header(secret.clone())
        .dispatch();
    assert_eq!(r.status(), Status::Ok);
    let r = client
        .post(format!("/v1/lanes/orders-g/members/{b1}/heartbeat"))
        .header(ContentType::JSON)
        .header(auth)
        .header(secret)
        .body(json!({"holding": []}).to_string())
        .dispatch();
    assert_eq!(r.status(), Status::NotFound);
    assert_eq!(body(r)["error"], "member_not_found");
}

#[test]
fn http_errors_name_the_problem() {
    let (client, _dir) = common::client();
    let auth = Header::new("Authorization", format!("Bearer {}", common::OPERATOR_TOKEN));
    let cases = [
        (json!({"zone": "az-b", "topic": "t", "partitions": 3}), 400, "invalid_lane"),
        (json!({"zone": "az-z", "topic": "t", "partitions": 4}), 400, "unknown_zone"),
        (json!({"zone": "az-b", "topic": "t t", "partitions": 4}), 400, "invalid_name"),
        (json!({"zone": "az-b", "topic": "t", "partitions": 4, "x": 1}), 400, "invalid_json"),
    ];
    for (request, status, code) in cases {
        let r = client
            .post("/v1/lanes/g/members")
            .header(ContentType::JSON)
            .header(auth.clone())
            .body(request.to_string())
            .dispatch();
        assert_eq!(r.status().code, status, "{request}");
        let v = body(r);
        assert_eq!(v["error"], code, "{request}: {v}");
        assert!(v["detail"].as_str().unwrap().len() > 10, "{v}");
    }
    let r = client.get("/v1/lanes/nobody").dispatch();
    assert_eq!(r.status(), Status::NotFound);
    assert_eq!(body(r)["error"], "group_not_found");
    client
        .post("/v1/lanes/g/members")
        .header(ContentType::JSON)
        .header(auth.clone())
        .body(json!({"zone": "az-b", "topic": "t", "partitions": 4}).to_string())
        .dispatch();
    let r = client
        .post("/v1/lanes/g/members")
        .header(ContentType::JSON)
        .header(auth.clone())
        .body(json!({"zone": "az-b", "topic": "u", "partitions": 4}).to_string())
        .dispatch();
    assert_eq!(r.status(), Status::Conflict);
    assert_eq!(body(r)["error"], "lane_mismatch");
}

#[test]
fn lane_settings_are_checked_and_the_documented_file_loads() {
    use figment::Figment;
    use figment::providers::{Format, Serialized, Toml};
    use tidegate::config::{Config, Overrides, Settings};
    let cases = [
        (
            "[lanes]\nsession_timeout = \"1s\"\nheartbeat_interval = \"800ms\"",
            "lanes.heartbeat_interval",
        ),
        ("[lanes]\nsession_timeout = \"0s\"", "lanes.session_timeout"),
        ("[lanes]\nlag_interval = \"soon\"", "lanes.lag_interval"),
        ("[lanes]\nkafka_bootstrap = \"a:1, b:2\"", "lanes.kafka_bootstrap"),
        ("[lanes]\nmax_members = 0", "lanes.max_members"),
        ("[lanes]\nsession = \"1s\"", "session"),
        // The lane lease must end well within a consumer's session (and not be absurdly short).
        ("[lanes]\nsession_timeout = \"10s\"\nlease = \"6s\"", "lanes.lease"),
        ("[lanes]\nlease = \"100ms\"", "lanes.lease"),
        ("[lanes]\nlease = \"later\"", "lanes.lease"),
    ];
    for (toml, key) in cases {
        let figment =
            Figment::from(Serialized::defaults(Settings::default())).merge(Toml::string(toml));
        let err = Config::from_figment(figment, &Overrides::default()).unwrap_err().to_string();
        assert!(err.contains(key), "{toml:?} should name `{key}`: {err}");
    }
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/tidegate.toml");
    let documented = Config::load(Some(&file), &Overrides::default()).unwrap();
    let defaults = Config::validate(Settings::default(), &Overrides::default()).unwrap();
    assert_eq!(documented.lanes.session_timeout_ms, defaults.lanes.session_timeout_ms);
    assert_eq!(documented.lanes.heartbeat_interval_ms, defaults.lanes.heartbeat_interval_ms);
    assert_eq!(documented.lanes.lag_interval_ms, defaults.lanes.lag_interval_ms);
    assert_eq!(documented.lanes.kafka_bootstrap, None);
    assert_eq!(documented.lanes.max_members, defaults.lanes.max_members);
    assert_eq!(documented.lanes.lease_ms, 4_000, "two fifths of the default 10 s session");
    assert_eq!(defaults.lanes.lease_ms, 4_000);
}
