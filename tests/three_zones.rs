//! Three zones on the real binary (issue 22): a log that starts with az-a, az-b and az-c, unit
//! sets moved with `PUT /v1/units`, az-c evacuated to az-a and az-b with capacity deciding the
//! split, and the coordinator, the edge and a Rust `Router` agreeing on 100 000 users at every
//! step; bad input refused with the field named; a restart replays the same table.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::gateway::{Edge, free_port};
use common::*;
use serde_json::{Value, json};

const USERS: usize = 100_000;

fn config() -> String {
    config_toml(
        r#"
initial_blue_percent = 50
[health]
window = "2s"
[capacity]
headroom = 0.0
[zones.az-a]
capacity_rps = 4000
[zones.az-b]
capacity_rps = 4000
[zones.az-c]
lane = "red"
"#,
    )
}

fn routing(url: &str) -> Value {
    let (status, body) = get_json(&format!("{url}/v1/routing"));
    assert_eq!(status, 200, "{body}");
    body
}

/// The owner (zone name) of every unit, from a routing body's `unit_map`.
fn owners(routing: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for run in routing["unit_map"].as_array().unwrap() {
        let (from, to) = run["units"].as_str().unwrap().split_once('-').unwrap();
        let (from, to): (usize, usize) = (from.parse().unwrap(), to.parse().unwrap());
        assert_eq!(from, out.len(), "runs cover the units in order");
        out.extend(std::iter::repeat_n(run["zone"].as_str().unwrap().to_owned(), to - from + 1));
    }
    out
}

fn users() -> Vec<String> {
    (0..USERS).map(|i| format!("user-{}", i.wrapping_mul(2_654_435_761) % 9_999_991)).collect()
}

/// `(user, lane)` for every user from `POST /v1/tag` at `url`, checked to be at `version`.
fn tags_from(url: &str, users: &[String], version: u64) -> Vec<String> {
    let mut out = Vec::with_capacity(users.len());
    for chunk in users.chunks(10_000) {
        let response = agent().post(&format!("{url}/v1/tag")).send_json(json!({"user_ids": chunk}));
        let mut response = response.expect("request sent");
        let status = response.status().as_u16();
        let body: Value = response.body_mut().read_json().unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["version"].as_u64(), Some(version), "{url} answers at version {version}");
        for tag in body["tags"].as_array().unwrap() {
            out.push(tag["color"].as_str().unwrap().to_owned());
        }
    }
    out
}

/// The coordinator, the edge and a Router built from `GET /v1/routing` give every user the same
/// lane; returns the lanes and how many users each lane got.
fn agree(
    coordinator: &str,
    edge: &Edge,
    users: &[String],
) -> (Vec<String>, BTreeMap<String, usize>) {
    let body = routing(coordinator);
    let version = body["version"].as_u64().unwrap();
    edge.wait_for_version(version);
    let router = tidegate::client::Router::fixed(tidegate::client::decode_table(&body).unwrap());
    let local: Vec<String> =
        users.iter().map(|u| router.tag(u).unwrap().lane.into_owned()).collect();
    let server = tags_from(coordinator, users, version);
    let at_edge = tags_from(&edge.url, users, version);
    let mismatches =
        (0..users.len()).filter(|&i| local[i] != server[i] || at_edge[i] != server[i]).count();
    assert_eq!(mismatches, 0, "coordinator, edge and Router disagree on {mismatches} users");
    let mut counts = BTreeMap::new();
    for lane in &server {
        *counts.entry(lane.clone()).or_default() += 1;
    }
    (server, counts)
}

fn put_units(url: &str, body: Value) -> (u16, Value) {
    put_json(&format!("{url}/v1/units"), OPERATOR_TOKEN, body)
}

/// Posts outcomes so each zone carries a steady load (requests per second).
fn feed(url: String, loads: &'static [(&'static str, &'static str, u64)], stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let batches: Vec<Value> = loads
                .iter()
                .map(|(zone, lane, rps)| json!({"zone": zone, "color": lane, "ok": rps / 10}))
                .collect();
            let _ = post_json(&format!("{url}/v1/outcomes"), OPERATOR_TOKEN, json!(batches));
            std::thread::sleep(Duration::from_millis(100));
        }
    });
}

#[test]
fn three_zones_move_evacuate_and_agree_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, config()).unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&file, &data);
    let url = server.url.clone();

    let start = routing(&url);
    let zones: Vec<(String, String)> = start["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| (z["name"].as_str().unwrap().to_owned(), z["lane"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        zones,
        [("az-b", "blue"), ("az-a", "green"), ("az-c", "red")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .to_vec(),
        "the genesis lists the configured zones in index order"
    );
    assert_eq!(start["zones"][2]["units"], 0);
    // GET /v1/zones reports every live zone, the third too: owning nothing, it is `empty`.
    let zone_states = |url: &str| -> Vec<(String, String, u64)> {
        get_json(&format!("{url}/v1/zones")).1["zones"]
            .as_array()
            .unwrap()
            .iter()
            .map(|z| {
                let name = z["zone"].as_str().unwrap().to_owned();
                (name, z["state"].as_str().unwrap().to_owned(), z["units"].as_u64().unwrap())
            })
            .collect()
    };
    let listed = zone_states(&url);
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!((listed[2].0.as_str(), listed[2].1.as_str(), listed[2].2), ("az-c", "empty", 0));

    let edge_config = dir.path().join("edge.toml");
    std::fs::write(&edge_config, "").unwrap();
    let edge = Edge::start(&edge_config, &url, &dir.path().join("edge-cache.json"), free_port());
    let users = users();

    // 1. Give az-c two unit sets in one version: only those units change owner.
    let before = owners(&start);
    let (status, body) = put_units(
        &url,
        json!({"moves": [{"units": "25-49", "zone": "az-c"}, {"units": "75-84", "zone": "red"}],
               "expected_version": start["version"], "reason": "give az-c its units"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["moved_units"], 35, "{body}");
    assert_eq!(body["version"].as_u64(), Some(start["version"].as_u64().unwrap() + 1));
    let after = owners(&body);
    for (unit, (b, a)) in before.iter().zip(&after).enumerate() {
        let moved = (25..=49).contains(&unit) || (75..=84).contains(&unit);
        if moved {
            assert_eq!(a, "az-c", "unit {unit}");
        } else {
            assert_eq!(a, b, "unit {unit} was not named and kept its owner");
        }
    }
    let listed = zone_states(&url);
    assert_eq!(listed[2].2, 35, "{listed:?}");
    assert_ne!(listed[2].1, "empty", "az-c owns units now: {listed:?}");
    let (lanes_after_move, counts) = agree(&url, &edge, &users);
    println!("after the move, users per lane: {counts:?}");
    let red = counts["red"] as f64 / USERS as f64;
    assert!((0.30..0.40).contains(&red), "35 of 100 units give az-c about 35% of users: {red}");
    // The dial is the two-zone special case: refused while three zones own units.
    let (status, body) = put_json(
        &format!("{url}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": 40, "expected_version": routing(&url)["version"], "reason": "x"}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("needs_two_zones")), "{body}");

    // 2. Bad input: each a 4xx naming the field.
    let version = routing(&url)["version"].clone();
    for (moves, code, names) in [
        (json!([{"units": "10-20", "zone": "az-q"}]), "unknown_zone", "moves[0].zone"),
        (
            json!([{"units": "10-20", "zone": "az-a"}, {"units": "20-30", "zone": "az-b"}]),
            "invalid_units",
            "moves[1].units",
        ),
        (json!([{"units": "90-100", "zone": "az-a"}]), "invalid_units", "moves[0].units"),
        (json!([{"units": "9-3", "zone": "az-a"}]), "invalid_units", "moves[0].units"),
        (json!([]), "invalid_units", "moves"),
    ] {
        let (status, body) =
            put_units(&url, json!({"moves": moves, "expected_version": version, "reason": "bad"}));
        assert_eq!((status, body["error"].as_str()), (400, Some(code)), "{moves}: {body}");
        assert!(body["detail"].as_str().unwrap().starts_with(names), "{body}");
    }
    let (status, body) = post_json(
        &format!("{url}/v1/zones/az-c/retire"),
        OPERATOR_TOKEN,
        json!({"expected_version": version, "reason": "too early"}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("zone_busy")), "{body}");
    assert!(body["detail"].as_str().unwrap().contains("owns 35 unit(s)"), "{body}");
    let (status, body) = post_json(
        &format!("{url}/v1/units/evacuate"),
        OPERATOR_TOKEN,
        json!({"zone": "az-c", "to": ["az-c"], "expected_version": version, "reason": "x"}),
    );
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_units")), "{body}");
    assert!(body["detail"].as_str().unwrap().starts_with("to[0]"), "{body}");
    assert_eq!(routing(&url)["version"], version, "no refused request changed the table");

    // 3. Evacuate az-c with capacity deciding the split: az-a has 3 000 rps of room, az-b 1 000.
    let stop = Arc::new(AtomicBool::new(false));
    feed(
        url.clone(),
        &[("az-a", "green", 1000), ("az-b", "blue", 3000), ("az-c", "red", 700)],
        Arc::clone(&stop),
    );
    std::thread::sleep(Duration::from_millis(4500));
    // The standing capacity question on three zones (issue 47): each receiver with a capacity
    // is asked about its share of az-c's users (before, only blue <-> green were asked, and
    // the third zone's health gauge was never refreshed).
    let metric = |series: &str| {
        let mut response = agent().get(&format!("{url}/metrics")).call().unwrap();
        let text = response.body_mut().read_to_string().unwrap();
        text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
    };
    let published = wait_until(Duration::from_secs(12), || {
        metric("tidegate_zone_can_absorb{zone=\"az-a\",from=\"az-c\"}") == Some(1.0)
            && metric("tidegate_zone_can_absorb{zone=\"az-b\",from=\"az-c\"}") == Some(1.0)
            && metric("tidegate_zone_error_ratio{zone=\"az-c\"}") == Some(0.0)
    });
    assert!(published, "az-a and az-b can each take their share of az-c's 700 rps");
    let evacuate = |dry_run: bool| {
        post_json(
            &format!("{url}/v1/units/evacuate"),
            OPERATOR_TOKEN,
            json!({"zone": "az-c", "expected_version": routing(&url)["version"],
                   "reason": "az-c is failing", "dry_run": dry_run}),
        )
    };
    let (status, preview) = evacuate(true);
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["dry_run"], true);
    assert_eq!(routing(&url)["version"], version, "a dry run changes nothing");
    let (status, body) = evacuate(false);
    stop.store(true, Ordering::SeqCst);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["moved_units"], 35, "{body}");
    let evacuated = owners(&body);
    let mut to: BTreeMap<&str, usize> = BTreeMap::new();
    for (unit, owner) in after.iter().enumerate() {
        if owner == "az-c" {
            *to.entry(evacuated[unit].as_str()).or_default() += 1;
        } else {
            assert_eq!(&evacuated[unit], owner, "unit {unit} was not az-c's and kept its owner");
        }
    }
    println!("az-c's 35 units went to {to:?}; projection {}", body["projection"]);
    assert!(!to.contains_key("az-c"));
    // Room 3 000 vs 1 000 rps (give or take the measured rates): about three quarters to az-a.
    let to_a = to.get("az-a").copied().unwrap_or(0);
    assert!((22..=30).contains(&to_a), "az-a took {to_a} of 35 units: {to:?}");
    for p in body["projection"].as_array().unwrap() {
        assert_eq!(p["verdict"], "fits", "{p}");
    }
    let (lanes_after_evacuation, counts) = agree(&url, &edge, &users);
    assert!(!counts.contains_key("red"), "{counts:?}");
    let stayed = (0..USERS)
        .filter(|&i| lanes_after_move[i] != "red")
        .filter(|&i| lanes_after_move[i] != lanes_after_evacuation[i])
        .count();
    assert_eq!(stayed, 0, "only az-c's users moved");

    // 4. Retire az-c: now it owns nothing. The dial works again on the two live zones.
    let (status, body) = post_json(
        &format!("{url}/v1/zones/az-c/retire"),
        OPERATOR_TOKEN,
        json!({"expected_version": routing(&url)["version"], "reason": "decommissioned"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["zones"][2]["retired"], true);
    let (status, body) = put_units(
        &url,
        json!({"moves": [{"units": "0-9", "zone": "az-c"}], "expected_version": routing(&url)["version"], "reason": "x"}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("zone_retired")), "{body}");
    let (status, body) = put_json(
        &format!("{url}/v1/global-writer"),
        OPERATOR_TOKEN,
        json!({"zone": "az-a", "read_only": false, "expected_version": routing(&url)["version"], "reason": "GZone"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["global_writer"]["zone"], "az-a");
    let gate = agent().get(&format!("{}/v1/gate", edge.url)).header("x-user-id", "alice");
    edge.wait_for_version(body["version"].as_u64().unwrap());
    let response = gate.call().unwrap();
    assert_eq!(response.headers().get("x-tidegate-global-writer").unwrap(), "az-a");

    // The CLI: a dry run changes nothing, then the move itself.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidegate"))
            .args(args)
            .args(["--server", &url])
            .env("TIDEGATE_TOKEN", OPERATOR_TOKEN)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let v = routing(&url)["version"].clone();
    let out = cli(&["units", "move", "0-4", "az-a", "--reason", "cli", "--dry-run"]);
    assert!(out.starts_with("dry run, nothing changed:"), "{out}");
    assert_eq!(routing(&url)["version"], v);
    let out = cli(&["units", "move", "0-4", "az-a", "--reason", "cli", "--force"]);
    assert!(out.contains("unit(s) moved"), "{out}");
    assert_eq!(routing(&url)["version"].as_u64(), Some(v.as_u64().unwrap() + 1), "{out}");

    // 5. A restart replays the same table from the log.
    let last = routing(&url);
    drop(server);
    let server = Server::start(&file, &data);
    let replayed = routing(&server.url);
    for key in ["version", "zones", "unit_map", "global_writer", "pins"] {
        assert_eq!(replayed[key], last[key], "{key} after the restart");
    }
}

/// A plan with a `move_units` step: stored (format level 3), dry-run (described, capacity judged
/// when it runs), drilled (the map comes back exactly), and run: the move lands in one version.
#[test]
fn a_plan_moves_unit_sets_and_a_drill_restores_the_map_it_started_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, config()).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let url = server.url.clone();
    let v = routing(&url)["version"].clone();
    let (status, body) = put_json(
        &format!("{url}/v1/plans/give-az-c"),
        OPERATOR_TOKEN,
        json!({"steps": [{"type": "move_units", "moves": [{"units": "0-9", "zone": "az-c"}, {"units": "90-99", "zone": "az-q"}]}],
               "rto": "5m", "expected_version": v, "reason": "bad zone"}),
    );
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_plan")), "{body}");
    assert!(body["detail"].as_str().unwrap().contains("steps[0].moves[1].zone"), "{body}");
    let (status, body) = put_json(
        &format!("{url}/v1/plans/give-az-c"),
        OPERATOR_TOKEN,
        json!({"steps": [{"type": "move_units", "moves": [{"units": "0-9", "zone": "az-c"}]}],
               "rto": "5m", "expected_version": v, "reason": "az-c takes 10%"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, dry) =
        post_json(&format!("{url}/v1/plans/give-az-c/dry-run"), OPERATOR_TOKEN, json!({}));
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["steps"][0]["description"], "move units 0-9 to az-c", "{dry}");
    // A drill moves the units, holds, and gives the map it started from back exactly: the
    // restore of a plan with unit moves is a map, not a dial position (format level 7). It
    // waits for the zones getting units back (az-b here) to be healthy.
    let stop = Arc::new(AtomicBool::new(false));
    feed(
        url.clone(),
        &[("az-a", "green", 500), ("az-b", "blue", 500), ("az-c", "red", 500)],
        Arc::clone(&stop),
    );
    let start = owners(&routing(&url));
    let (status, body) = post_json(
        &format!("{url}/v1/plans/give-az-c/drill"),
        OPERATOR_TOKEN,
        json!({"reason": "drill", "hold": "1s"}),
    );
    assert_eq!(status, 201, "{body}");
    let run = body["id"].as_u64().or(body["run"]["id"].as_u64()).expect("the drill's run ID");
    let mut seen_moved = false;
    let report = wait_for(Duration::from_secs(20), || {
        seen_moved |= routing(&url)["zones"][2]["units"] == 10;
        let (_, r) = get_json(&format!("{url}/v1/plans/give-az-c/runs/{run}"));
        (r["state"] == "completed").then_some(r)
    });
    assert!(seen_moved, "the drill moved az-c's units during its hold: {report}");
    stop.store(true, Ordering::SeqCst);
    assert_eq!(owners(&routing(&url)), start, "the drill restored the map: {report}");
    assert_eq!(routing(&url)["zones"][2]["units"], 0);
    let (status, body) = post_json(
        &format!("{url}/v1/plans/give-az-c/run"),
        OPERATOR_TOKEN,
        json!({"reason": "go"}),
    );
    assert_eq!(status, 201, "{body}");
    assert!(
        wait_until(std::time::Duration::from_secs(10), || routing(&url)["zones"][2]["units"] == 10),
        "the run never moved the units: {}",
        routing(&url)
    );
    assert_eq!(owners(&routing(&url))[..10], vec!["az-c".to_owned(); 10][..]);
}

/// A plan's `drain` step among three zones is a zone drain (issue 22): the dry run says how many
/// units go in how many steps; a drill moves az-c's 40 units out to both other zones a slice at a
/// time and gives the map back unit for unit; a run empties az-c, moving only its units; a step
/// that would give az-c units fails the run, saying `move_units` does that.
#[test]
fn a_plans_zone_move_among_three_zones_is_a_zone_drain_and_a_drill_restores_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    let toml = config().replace(
        "[health]\nwindow = \"2s\"",
        "[health]\nwindow = \"1s\"\n[drain]\ninterval = \"200ms\"\ntick = \"20ms\"",
    );
    assert!(toml.contains("interval = \"200ms\""), "the drain interval is set");
    std::fs::write(&file, toml).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let url = server.url.clone();
    let (status, body) = put_units(
        &url,
        json!({"moves": [{"units": "60-99", "zone": "az-c"}], "expected_version": routing(&url)["version"], "reason": "az-c takes 40 units"}),
    );
    assert_eq!(status, 200, "{body}");
    let start = owners(&body);
    let stop = Arc::new(AtomicBool::new(false));
    feed(
        url.clone(),
        &[("az-a", "green", 500), ("az-b", "blue", 500), ("az-c", "red", 500)],
        Arc::clone(&stop),
    );
    std::thread::sleep(Duration::from_millis(1200));
    let put_plan = |name: &str, to_percent: u32| {
        put_json(
            &format!("{url}/v1/plans/{name}"),
            OPERATOR_TOKEN,
            json!({"steps": [{"type": "drain", "zone": "az-c", "to_percent": to_percent}],
                   "rto": "5m", "expected_version": routing(&url)["version"], "reason": "az-c maintenance"}),
        )
    };
    let (status, body) = put_plan("empty-az-c", 0);
    assert_eq!(status, 200, "{body}");
    let (status, dry) =
        post_json(&format!("{url}/v1/plans/empty-az-c/dry-run"), OPERATOR_TOKEN, json!({}));
    assert_eq!(status, 200, "{dry}");
    let step = &dry["steps"][0];
    assert!(
        step["description"]
            .as_str()
            .unwrap()
            .starts_with("drain az-c to 0% among the other live zones: 40 unit(s) in 4 step(s)"),
        "{dry}"
    );
    assert_eq!(step["users_moved_percent"], 40.0, "{dry}");

    // The drill: slices out to both receivers, then the map comes back exactly.
    let runs_of = |plan: &str, run: u64| get_json(&format!("{url}/v1/plans/{plan}/runs/{run}")).1;
    let (status, body) = post_json(
        &format!("{url}/v1/plans/empty-az-c/drill"),
        OPERATOR_TOKEN,
        json!({"reason": "drill", "hold": "1s"}),
    );
    assert_eq!(status, 201, "{body}");
    let run = body["id"].as_u64().or(body["run"]["id"].as_u64()).expect("the drill's run ID");
    let mut az_c_units = std::collections::BTreeSet::new();
    let mut gained = [false, false];
    let units_of = |r: &Value, z: usize| r["zones"][z]["units"].as_u64().unwrap();
    let before = routing(&url);
    let report = wait_for(Duration::from_secs(30), || {
        let now = routing(&url);
        az_c_units.insert(units_of(&now, 2));
        gained[0] |= units_of(&now, 0) > units_of(&before, 0);
        gained[1] |= units_of(&now, 1) > units_of(&before, 1);
        let r = runs_of("empty-az-c", run);
        (r["state"] == "completed").then_some(r)
    });
    assert!(az_c_units.contains(&0), "the drill emptied az-c: {az_c_units:?} {report}");
    assert!(az_c_units.len() >= 3, "a slice at a time: {az_c_units:?}");
    assert_eq!(gained, [true, true], "both other zones received units");
    assert_eq!(owners(&routing(&url)), start, "the drill restored the map: {report}");

    // The run: az-c ends empty, and only its units changed owner.
    let (status, body) = post_json(
        &format!("{url}/v1/plans/empty-az-c/run"),
        OPERATOR_TOKEN,
        json!({"reason": "az-c maintenance"}),
    );
    assert_eq!(status, 201, "{body}");
    let run = body["id"].as_u64().or(body["run"]["id"].as_u64()).unwrap();
    let report = wait_for(Duration::from_secs(30), || {
        let r = runs_of("empty-az-c", run);
        (r["state"] == "completed").then_some(r)
    });
    let after = owners(&routing(&url));
    assert_eq!(routing(&url)["zones"][2]["units"], 0, "{report}");
    for (unit, (was, now)) in start.iter().zip(&after).enumerate() {
        if was != "az-c" {
            assert_eq!(was, now, "unit {unit} was not az-c's and moved");
        }
    }
    let drains: Vec<Value> =
        get_json(&format!("{url}/v1/drains")).1["drains"].as_array().cloned().unwrap_or_default();
    assert!(
        drains.iter().any(|d| d["receiving_zones"] == json!(["az-b", "az-a"])
            || d["receiving_zones"] == json!(["az-a", "az-b"])),
        "the step's drain spread over both other zones: {drains:?}"
    );

    // Giving az-c units is not a zone drain: the run fails and says what does it.
    let (status, body) = put_plan("fill-az-c", 30);
    assert_eq!(status, 200, "{body}");
    let (status, body) = post_json(
        &format!("{url}/v1/plans/fill-az-c/run"),
        OPERATOR_TOKEN,
        json!({"reason": "az-c back"}),
    );
    assert_eq!(status, 201, "{body}");
    let run = body["id"].as_u64().or(body["run"]["id"].as_u64()).unwrap();
    let report = wait_for(Duration::from_secs(10), || {
        let r = runs_of("fill-az-c", run);
        (r["state"] == "failed").then_some(r)
    });
    assert!(report.to_string().contains("a move_units step gives a zone more"), "{report}");
    assert_eq!(routing(&url)["zones"][2]["units"], 0, "nothing moved");
    stop.store(true, Ordering::SeqCst);
}

/// `(zone, index, lane, samples with a known error rate)` of each series of
/// `GET /v1/zones/history`.
fn history(url: &str) -> Vec<(String, u64, String, usize)> {
    let (status, body) = get_json(&format!("{url}/v1/zones/history"));
    assert_eq!(status, 200, "{body}");
    body["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| {
            let known = z["samples"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["error_rate"].is_number())
                .count();
            (
                z["zone"].as_str().unwrap().to_owned(),
                z["index"].as_u64().unwrap(),
                z["color"].as_str().unwrap().to_owned(),
                known,
            )
        })
        .collect()
}

/// The series' `(zone, index, lane)`.
fn names(history: &[(String, u64, String, usize)]) -> Vec<(String, u64, String)> {
    history.iter().map(|(z, i, l, _)| (z.clone(), *i, l.clone())).collect()
}

/// The health history (the UI's charts) samples every live zone of the table, a third one too,
/// and follows the table: a zone added through the API is listed at once, a retired one goes.
/// Before this, the sampler knew blue and green only, so az-c had no series and no chart.
#[test]
fn the_zone_history_has_a_series_for_every_live_zone() {
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, config()).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let url = server.url.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let loads = &[("az-b", "blue", 300), ("az-a", "green", 300), ("az-c", "red", 300)];
    feed(url.clone(), loads, Arc::clone(&stop));

    let three: Vec<(String, u64, String)> =
        [("az-b", 0, "blue"), ("az-a", 1, "green"), ("az-c", 2, "red")]
            .map(|(z, i, l)| (z.to_owned(), i, l.to_owned()))
            .to_vec();
    // Listed from the start, in index order, each with its own lane.
    assert_eq!(names(&history(&url)), three);
    // Sampled every 2 s: az-c gets readings of its own, like blue and green.
    let sampled = wait_until(Duration::from_secs(15), || {
        history(&url).iter().all(|(_, _, _, known)| *known >= 2)
    });
    assert!(sampled, "every zone has two known samples within 15 s: {:?}", history(&url));

    // A fourth zone added through the API: listed at once (no samples yet), then sampled; its
    // health is unknown (nobody reports for it), which the history keeps as `null`.
    let version = routing(&url)["version"].as_u64().unwrap();
    let (status, body) = post_json(
        &format!("{url}/v1/zones"),
        OPERATOR_TOKEN,
        json!({"name": "az-d", "lane": "teal", "expected_version": version, "reason": "history test"}),
    );
    assert_eq!(status, 200, "{body}");
    let mut four = three.clone();
    four.push(("az-d".to_owned(), 3, "teal".to_owned()));
    assert_eq!(names(&history(&url)), four);
    let (_, body) = get_json(&format!("{url}/v1/zones/history"));
    let az_d = &body["zones"][3];
    let sampled = wait_until(Duration::from_secs(10), || {
        let (_, body) = get_json(&format!("{url}/v1/zones/history"));
        !body["zones"][3]["samples"].as_array().unwrap().is_empty()
    });
    assert!(sampled, "az-d is sampled within 10 s: {az_d}");
    let (_, body) = get_json(&format!("{url}/v1/zones/history"));
    assert!(body["zones"][3]["samples"][0]["error_rate"].is_null(), "{body}");

    // Retired: its series goes; the others keep theirs.
    let (status, body) = post_json(
        &format!("{url}/v1/zones/az-d/retire"),
        OPERATOR_TOKEN,
        json!({"expected_version": version + 1, "reason": "history test"}),
    );
    assert_eq!(status, 200, "{body}");
    let after = history(&url);
    assert_eq!(names(&after), three);
    assert!(after.iter().all(|(_, _, _, known)| *known >= 2), "{after:?}");
    stop.store(true, Ordering::SeqCst);
    // The feeder ends within one of its 100 ms rounds, before the server stops.
    std::thread::sleep(Duration::from_millis(300));
    eprintln!("zone history test: {:.1} s", started.elapsed().as_secs_f64());
}

/// `PUT /v1/units` and `POST /v1/units/evacuate` take an `Idempotency-Key` like the dial: a
/// retry of a move whose answer was lost gets the first answer instead of a version conflict,
/// and nothing moves twice; the key reused for another move is refused and moves nothing; a dry
/// run neither uses nor records a key.
#[test]
fn a_retried_unit_move_or_evacuation_with_its_key_applies_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, config()).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let url = server.url.clone();
    let send = |path: &str, key: Option<&str>, body: &Value| {
        let agent = agent();
        let target = format!("{url}{path}");
        let mut request =
            if path.ends_with("evacuate") { agent.post(&target) } else { agent.put(&target) }
                .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"));
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        let mut response = request.send_json(body).unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_json::<Value>().unwrap())
    };
    let version = routing(&url)["version"].as_u64().unwrap();
    let give = json!({"moves": [{"units": "0-9", "zone": "az-c"}],
                      "expected_version": version, "reason": "keyed move"});
    // A dry run with the key changes nothing and does not bind the key.
    let dry = json!({"moves": [{"units": "90-99", "zone": "az-c"}], "dry_run": true,
                     "expected_version": version, "reason": "preview"});
    let (status, body) = send("/v1/units", Some("move-1"), &dry);
    assert_eq!((status, &body["dry_run"]), (200, &json!(true)), "{body}");
    let (status, first) = send("/v1/units", Some("move-1"), &give);
    assert_eq!((status, first["version"].as_u64()), (200, Some(version + 1)), "{first}");
    assert_eq!(first["moved_units"], 10, "{first}");
    // The retry: the first answer, the same version, nothing moved again.
    let (status, again) = send("/v1/units", Some("move-1"), &give);
    assert_eq!((status, &again), (200, &first));
    // Control: the same retry without a key is a version conflict (the reason keys exist).
    let (status, body) = send("/v1/units", None, &give);
    assert_eq!((status, body["error"].as_str()), (409, Some("version_conflict")), "{body}");
    // The key reused for another move: refused, nothing moves.
    let other = json!({"moves": [{"units": "10-19", "zone": "az-c"}],
                       "expected_version": version + 1, "reason": "keyed move"});
    let (status, body) = send("/v1/units", Some("move-1"), &other);
    assert_eq!((status, body["error"].as_str()), (422, Some("idempotency_key_reused")), "{body}");
    assert_eq!(routing(&url)["version"].as_u64(), Some(version + 1));

    // The evacuation the same way.
    // (Forced: no load is reported here, so the capacity view cannot project the receivers.)
    let evacuate =
        json!({"zone": "az-c", "expected_version": version + 1, "reason": "keyed", "force": true});
    let (status, first) = send("/v1/units/evacuate", Some("evac-1"), &evacuate);
    assert_eq!((status, first["version"].as_u64()), (200, Some(version + 2)), "{first}");
    let (status, again) = send("/v1/units/evacuate", Some("evac-1"), &evacuate);
    assert_eq!((status, &again), (200, &first));
    let after = routing(&url);
    assert_eq!(after["version"].as_u64(), Some(version + 2));
    assert!(owners(&after).iter().all(|zone| zone != "az-c"), "az-c owns nothing");
}

/// A step-by-step drain of one zone among three on the real binary: az-c's units leave in
/// slices of 10 to az-a and az-b, a failing receiver holds the drain (no unit moves while it
/// does), the drain finishes once it recovers, only az-c's units changed owner, and the
/// coordinator, the edge and a Router agree on every user afterwards. Bad receivers are refused
/// with the field named.
#[test]
fn a_zone_drain_among_three_steps_out_guarded_by_every_receiver() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    let toml = config().replace(
        "[health]\nwindow = \"2s\"",
        "[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"",
    );
    assert!(toml.contains("tick = \"20ms\""), "the drain tick is set");
    std::fs::write(&file, toml).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let url = server.url.clone();
    let start = routing(&url);
    let (status, body) = put_units(
        &url,
        json!({"moves": [{"units": "60-99", "zone": "az-c"}], "expected_version": start["version"], "reason": "az-c takes 40 units"}),
    );
    assert_eq!(status, 200, "{body}");
    let before = owners(&body);

    // Outcomes every 100 ms: 50 requests per zone, az-b failing `errors` of them.
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    {
        let (url, stop, errors) = (url.clone(), Arc::clone(&stop), Arc::clone(&errors));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let bad = errors.load(Ordering::SeqCst);
                let batches = json!([
                    {"zone": "az-a", "color": "green", "ok": 50},
                    {"zone": "az-b", "color": "blue", "ok": 50 - bad, "error": bad},
                    {"zone": "az-c", "color": "red", "ok": 50},
                ]);
                let _ = post_json(&format!("{url}/v1/outcomes"), OPERATOR_TOKEN, batches);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }
    std::thread::sleep(Duration::from_millis(1200));

    // Bad receivers: each a 400 naming the field.
    let drain = |to: Value| {
        post_json(
            &format!("{url}/v1/drains"),
            OPERATOR_TOKEN,
            json!({"zone": "az-c", "target_percent": 0, "step_percent": 10, "interval": "300ms",
                   "to": to, "guard": {"max_error_rate": 0.05, "min_requests": 10, "breaches": 1000},
                   "reason": "az-c maintenance"}),
        )
    };
    for (to, code, needle) in [
        (json!(["az-q"]), "unknown_zone", "to[0]"),
        (json!(["az-a", "az-c"]), "invalid_drain", "to[1]"),
        (json!(["az-a", "az-a"]), "invalid_drain", "named twice"),
    ] {
        let (status, body) = drain(to.clone());
        assert_eq!((status, body["error"].as_str()), (400, Some(code)), "{to}: {body}");
        assert!(body["detail"].as_str().unwrap().contains(needle), "{to}: {body}");
    }
    assert_eq!(routing(&url)["version"], body["version"], "refusals change nothing");

    // az-b fails before the drain starts: the first step holds on it.
    errors.store(25, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1200));
    let (status, body) = drain(json!(["az-a", "az-b"]));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["receiving_zones"], json!(["az-a", "az-b"]), "{body}");
    assert_eq!(
        (body["from_percent"].as_f64(), body["target_percent"].as_f64()),
        (Some(40.0), Some(0.0))
    );
    let id = body["id"].as_u64().unwrap();
    let current = || get_json(&format!("{url}/v1/drains/{id}")).1;
    let held = wait_for(Duration::from_secs(10), || {
        let d = current();
        d["hold_reason"].as_str().is_some_and(|r| r.contains("receiving zone az-b")).then_some(d)
    });
    assert_eq!(held["steps_done"], 0, "{held}");
    std::thread::sleep(Duration::from_millis(900));
    let units_c = |r: &Value| owners(r).iter().filter(|o| *o == "az-c").count();
    assert_eq!(units_c(&routing(&url)), 40, "no unit moves while a receiver fails");

    // az-b recovers: the drain steps az-c out, 10 units at a time, down to nothing.
    errors.store(0, Ordering::SeqCst);
    let mut seen = vec![40];
    let done = wait_for(Duration::from_secs(30), || {
        let n = units_c(&routing(&url));
        if seen.last() != Some(&n) {
            seen.push(n);
        }
        let d = current();
        (d["state"] == "completed").then_some(d)
    });
    stop.store(true, Ordering::SeqCst);
    println!("az-c's units as the drain ran: {seen:?}; {done}");
    assert_eq!(done["steps_done"], 4, "{done}");
    assert!(seen.windows(2).all(|w| w[0] > w[1] && w[0] - w[1] <= 10), "{seen:?}");
    assert_eq!(seen.last(), Some(&0));
    let after = owners(&routing(&url));
    let mut to: BTreeMap<&str, usize> = BTreeMap::new();
    for (unit, (b, a)) in before.iter().zip(&after).enumerate() {
        if b == "az-c" {
            *to.entry(a.as_str()).or_default() += 1;
        } else {
            assert_eq!(a, b, "unit {unit} was not az-c's and kept its owner");
        }
    }
    println!("az-c's 40 units went to {to:?}");
    assert_eq!(to.values().sum::<usize>(), 40);
    assert!(
        to.get("az-a").is_some_and(|n| *n > 0) && to.get("az-b").is_some_and(|n| *n > 0),
        "{to:?}"
    );

    // The audit has the start and four steps, each naming its moves and the guard.
    let (status, audit) = get_json(&format!("{url}/v1/audit?limit=50"));
    assert_eq!(status, 200, "{audit}");
    let steps: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "drain_step")
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(steps.len(), 4, "{steps:?}");
    assert!(
        steps.iter().all(|r| r.contains("guard passed, moving units") && r.contains(" to az-")),
        "{steps:?}"
    );

    // The CLI names the receivers.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["drain", "status", &id.to_string(), "--server", &url])
        .env("TIDEGATE_TOKEN", OPERATOR_TOKEN)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains(&format!("drain {id} of az-c to az-a, az-b (completed)")), "{out}");

    let edge_config = dir.path().join("edge.toml");
    std::fs::write(&edge_config, "").unwrap();
    let edge = Edge::start(&edge_config, &url, &dir.path().join("edge-cache.json"), free_port());
    let (_, counts) = agree(&url, &edge, &users());
    assert!(!counts.contains_key("red"), "{counts:?}");
}

/// Polls `check` every 50 ms until it gives a value; panics after `timeout`.
fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(std::time::Instant::now() < deadline, "gave up after {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A zone's settings are configuration: the order that needs no restart after the zone is added
/// is to configure `[zones.<zone>]` on every replica first (a rolling restart), then add the
/// zone with `POST /v1/zones`: its capacity counts from the version that adds it. The control,
/// a zone added without configuration, is not judged on capacity at all, so the same move that
/// the configured zone refuses is accepted there. A zone just added owns nothing and has no
/// traffic to report, so its load is judged 0, not unknown (it was unknown, and every first
/// move to a new site needed `force`).
#[test]
fn a_zone_configured_before_it_is_added_is_judged_on_its_capacity_at_once() {
    let started = std::time::Instant::now();
    let two_zones = config_toml(
        r#"
initial_blue_percent = 50
[health]
window = "2s"
[capacity]
headroom = 0.0
[zones.az-a]
capacity_rps = 4000
[zones.az-b]
capacity_rps = 4000
"#,
    );
    let configured = format!("{two_zones}\n[zones.az-d]\nlane = \"teal\"\ncapacity_rps = 100\n");
    let loads = &[("az-b", "blue", 300), ("az-a", "green", 300)];
    // Adds az-d and moves 40 units to it (about 240 rps of the 600 fed): the answer's status,
    // error and az-d's capacity as `GET /v1/zones` reports it right after the add.
    let add_then_move = |url: &str| -> (u16, Value, Value) {
        let version = routing(url)["version"].as_u64().unwrap();
        let (status, body) = post_json(
            &format!("{url}/v1/zones"),
            OPERATOR_TOKEN,
            json!({"name": "az-d", "lane": "teal", "expected_version": version, "reason": "new site"}),
        );
        assert_eq!(status, 200, "{body}");
        let (_, zones) = get_json(&format!("{url}/v1/zones"));
        let az_d = zones["zones"].as_array().unwrap().iter().find(|z| z["zone"] == "az-d").cloned();
        let capacity = az_d.map(|z| z["capacity"]["capacity_rps"].clone()).unwrap_or(Value::Null);
        let loaded = wait_until(Duration::from_secs(10), || {
            let (_, zones) = get_json(&format!("{url}/v1/zones"));
            zones["zones"]
                .as_array()
                .unwrap()
                .iter()
                .take(2)
                .all(|z| z["capacity"]["load_rps"].is_number())
        });
        assert!(loaded, "both zones report load: {}", get_json(&format!("{url}/v1/zones")).1);
        let (status, body) = put_units(
            url,
            json!({"moves": [{"units": "0-39", "zone": "az-d"}], "expected_version": version + 1,
                   "reason": "give az-d its units"}),
        );
        (status, body, capacity)
    };
    let v = |url: &str| routing(url)["version"].clone();

    // Configured first: the log starts with two zones, then every replica restarts with az-d's
    // settings (it is not in the log yet, so it is not a zone yet), then the zone is added.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    let data = dir.path().join("data");
    std::fs::write(&file, &two_zones).unwrap();
    drop(Server::start(&file, &data));
    std::fs::write(&file, &configured).unwrap();
    let server = Server::start(&file, &data);
    let zones = routing(&server.url)["zones"].as_array().unwrap().len();
    assert_eq!(zones, 2, "a configured zone joins an existing log only by the logged command");
    let stop = Arc::new(AtomicBool::new(false));
    feed(server.url.clone(), loads, Arc::clone(&stop));
    let (status, body, capacity) = add_then_move(&server.url);
    stop.store(true, Ordering::SeqCst);
    assert_eq!(capacity, json!(100.0), "az-d's configured capacity counts at once");
    assert_eq!((status, body["error"].as_str()), (409, Some("insufficient_capacity")), "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("az-d") && !detail.contains("unknown"), "{body}");
    println!("configured first, 40 units: {status} {detail}");
    // Ten units (about 60 rps) fit in its 100 rps, with no force.
    let (status, body) = put_units(
        &server.url,
        json!({"moves": [{"units": "0-9", "zone": "az-d"}], "expected_version": v(&server.url),
               "reason": "give az-d ten units"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["moved_units"], 10, "{body}");
    std::thread::sleep(Duration::from_millis(300));
    drop(server);

    // Control: added without configuration, az-d has no capacity, and the same move goes.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, &two_zones).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let stop = Arc::new(AtomicBool::new(false));
    feed(server.url.clone(), loads, Arc::clone(&stop));
    let (status, body, capacity) = add_then_move(&server.url);
    stop.store(true, Ordering::SeqCst);
    assert_eq!(capacity, Value::Null, "an unconfigured zone has no capacity");
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(Duration::from_millis(300));
    eprintln!("configured-zone test: {:.1} s", started.elapsed().as_secs_f64());
}

/// Issue 47: an evacuation that names no receivers never gives units to a failing zone, and a
/// zone of unknown health (silent or dead: it reports nothing) receives only when no zone is
/// known healthy; the answer and the audit name whom it skipped and why. Control: naming the
/// failing zone in `to` (the operator's override) gives it its share, as every evacuation did
/// before. With every candidate failing, 409 `no_receiver`.
#[test]
fn an_evacuation_skips_failing_and_silent_receivers_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    std::fs::write(&config_file, config()).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let url = server.url.clone();
    // Give az-c a third of the units, so each zone owns some.
    let version = routing(&url)["version"].clone();
    let (status, body) = put_units(
        &url,
        json!({"moves": [{"units": "0-29", "zone": "az-c"}], "expected_version": version, "reason": "setup"}),
    );
    assert_eq!(status, 200, "{body}");
    let feed_errors = |errors: &'static [(&'static str, &'static str, u64, u64)],
                       stop: Arc<AtomicBool>| {
        let url = url.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let batches: Vec<Value> = errors
                    .iter()
                    .map(|(zone, lane, ok, error)| json!({"zone": zone, "color": lane, "ok": ok, "error": error}))
                    .collect();
                let _ = post_json(&format!("{url}/v1/outcomes"), OPERATOR_TOKEN, json!(batches));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let evacuate = |zone: &str, to: Option<Value>| {
        let mut body = json!({"zone": zone, "expected_version": routing(&url)["version"], "reason": "az-b is failing"});
        if let Some(to) = to {
            body["to"] = to;
        }
        post_json(&format!("{url}/v1/units/evacuate"), OPERATOR_TOKEN, body)
    };
    let moved_to = |before: &Value, after: &Value, source: &str| {
        let (before, after) = (owners(before), owners(after));
        let mut to: BTreeMap<String, usize> = BTreeMap::new();
        for (unit, owner) in before.iter().enumerate() {
            if owner == source {
                *to.entry(after[unit].clone()).or_default() += 1;
            }
        }
        to
    };

    // 1. az-c at 10 % errors, az-a healthy: az-b's units all go to az-a.
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed_errors(
        &[("az-a", "green", 100, 0), ("az-b", "blue", 50, 50), ("az-c", "red", 90, 10)],
        Arc::clone(&stop),
    );
    std::thread::sleep(Duration::from_millis(2500));
    // A user pinned to az-b stays there (a pin outranks the map): the answer and the audit say
    // so, and the gauge the alert reads counts them.
    let (status, body) = put_json(
        &format!("{url}/v1/pins/vip-1"),
        OPERATOR_TOKEN,
        json!({"color": "blue", "expected_version": routing(&url)["version"], "reason": "vip"}),
    );
    assert_eq!(status, 200, "{body}");
    let before = routing(&url);
    let (status, body) = evacuate("az-b", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["pinned_users_left"], 1, "{body}");
    assert!(body["note"].as_str().unwrap().starts_with("1 pinned user(s) stay in az-b"), "{body}");
    let mut response = agent().get(&format!("{url}/metrics")).call().unwrap();
    let metrics = response.body_mut().read_to_string().unwrap();
    assert!(
        metrics.contains("tidegate_zone_pinned_users{zone=\"az-b\"} 1"),
        "the gauge counts the pin"
    );
    let to = moved_to(&before, &body, "az-b");
    assert_eq!(to.keys().collect::<Vec<_>>(), ["az-a"], "{to:?}");
    let skipped = body["skipped_receivers"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{body}");
    assert!(skipped[0].as_str().unwrap().starts_with("az-c: failing (10.0% errors"), "{body}");
    let (_, audit) = get_json(&format!("{url}/v1/audit?limit=1"));
    let reason = audit["entries"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("receivers skipped: az-c")
            && reason.contains("1 pinned user(s) stay in az-b"),
        "{reason}"
    );

    // 2. Control: az-c named in `to` receives its share although it fails.
    let before = routing(&url);
    let (status, body) = evacuate("az-a", Some(json!(["az-b", "az-c"])));
    assert_eq!(status, 200, "{body}");
    assert!(moved_to(&before, &body, "az-a").get("az-c").is_some_and(|n| *n > 0), "{body}");
    assert!(body.get("skipped_receivers").is_none(), "{body}");

    stop.store(true, Ordering::SeqCst);
    feeder.join().unwrap();

    // 3. Every candidate failing: refused, nothing moved.
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed_errors(
        &[("az-a", "green", 50, 50), ("az-b", "blue", 50, 50), ("az-c", "red", 100, 0)],
        Arc::clone(&stop),
    );
    std::thread::sleep(Duration::from_millis(2500));
    let before = routing(&url);
    let (status, body) = evacuate("az-c", None);
    assert_eq!((status, body["error"].as_str()), (409, Some("no_receiver")), "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("az-b: failing") && detail.contains("az-a: failing"), "{body}");
    assert_eq!(routing(&url)["version"], before["version"]);
    stop.store(true, Ordering::SeqCst);
    feeder.join().unwrap();

    // 4. az-a healthy, az-c silent (reports nothing): az-b's units go to az-a only.
    let stop = Arc::new(AtomicBool::new(false));
    let feeder =
        feed_errors(&[("az-a", "green", 100, 0), ("az-b", "blue", 100, 0)], Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(2500));
    let before = routing(&url);
    let (status, body) = evacuate("az-b", None);
    stop.store(true, Ordering::SeqCst);
    feeder.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(moved_to(&before, &body, "az-b").keys().collect::<Vec<_>>(), ["az-a"], "{body}");
    let skipped = body["skipped_receivers"].as_array().unwrap();
    assert!(skipped[0].as_str().unwrap().starts_with("az-c: health unknown"), "{body}");
}

/// The automatic trigger on three zones (issue 47): a failing zone's plan fires, and its run
/// gives the units only to zones the guard passes (not to one at 10 % errors); a second
/// automatic run leaves out the zone the first emptied (the hop limit) and gives everything to
/// the zone left; a third, whose every possible receiver automation emptied, is held
/// `hop_limit`. The share cap is judged on the units the zone owns (30 % under a 35 % cap fires;
/// 100 % does not).
#[test]
fn the_automatic_trigger_judges_three_zones_by_health_hop_and_share() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    let mut text = config();
    text.push_str(
        "[drain]\ntick = \"50ms\"\n[drain.evacuate]\nstep_percent = 50.0\ninterval = \"200ms\"\n\
         min_requests = 5\n[plans]\ntriggers = true\nauto_window = \"1s\"\n\
         auto_max_share_percent = 35.0\n",
    );
    std::fs::write(&config_file, text).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let url = server.url.clone();
    let version = routing(&url)["version"].clone();
    let (status, body) = put_units(
        &url,
        json!({"moves": [{"units": "0-29", "zone": "az-c"}], "expected_version": version, "reason": "setup"}),
    );
    assert_eq!(status, 200, "{body}");
    let count = |r: &Value, zone: &str| owners(r).iter().filter(|o| *o == zone).count();
    let start = routing(&url);
    assert_eq!((count(&start, "az-a"), count(&start, "az-b"), count(&start, "az-c")), (50, 20, 30));
    for zone in ["az-a", "az-b", "az-c"] {
        let (_, plans) = get_json(&format!("{url}/v1/plans"));
        let body = json!({
            "expected_version": plans["version"], "reason": "reviewed", "rto": "1m",
            "steps": [{"type": "evacuate", "zone": zone, "to_percent": 0}],
            "trigger": {"zone_down_for": "1s"}, "cooldown": "1h",
        });
        let (status, plan) =
            put_json(&format!("{url}/v1/plans/{zone}-failing"), OPERATOR_TOKEN, body);
        assert_eq!(status, 200, "{plan}");
    }
    // Error percentages per zone, changed between phases.
    let errors: Arc<[std::sync::atomic::AtomicU64; 3]> = Arc::new(Default::default());
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (url, errors, stop) = (url.clone(), Arc::clone(&errors), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let batches: Vec<Value> = [("az-a", "green"), ("az-b", "blue"), ("az-c", "red")]
                    .iter()
                    .enumerate()
                    .map(|(i, (zone, lane))| {
                        let e = errors[i].load(Ordering::SeqCst);
                        json!({"zone": zone, "color": lane, "ok": 100 - e, "error": e})
                    })
                    .collect();
                let _ = post_json(&format!("{url}/v1/outcomes"), OPERATOR_TOKEN, json!(batches));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let set = |a: u64, b: u64, c: u64| {
        for (i, e) in [a, b, c].into_iter().enumerate() {
            errors[i].store(e, Ordering::SeqCst);
        }
    };
    let runs = |plan: &str| -> Vec<Value> {
        let (status, body) = get_json(&format!("{url}/v1/plans/{plan}/runs"));
        assert_eq!(status, 200, "{body}");
        body["runs"].as_array().unwrap().clone()
    };
    let completed = |plan: &str| {
        wait_until(Duration::from_secs(20), || {
            runs(plan).first().is_some_and(|r| r["state"] == "completed")
        })
    };

    // 1. az-b (20 %) fails while az-c is at 10 % errors: everything goes to az-a.
    set(0, 100, 10);
    assert!(completed("az-b-failing"), "{:?}", runs("az-b-failing"));
    assert_eq!(runs("az-b-failing")[0]["started_by"], "auto");
    let after = routing(&url);
    assert_eq!((count(&after, "az-a"), count(&after, "az-b"), count(&after, "az-c")), (70, 0, 30));

    // 2. az-b recovers (healthy, owning nothing), az-c (30 %, under the 35 % cap) fails: az-b
    //    is left out by the hop limit, so everything goes to az-a (by free room az-b, idle,
    //    would have taken most).
    set(0, 0, 100);
    assert!(completed("az-c-failing"), "{:?}", runs("az-c-failing"));
    let after = routing(&url);
    assert_eq!((count(&after, "az-a"), count(&after, "az-b"), count(&after, "az-c")), (100, 0, 0));

    // 3. az-a fails: both zones that could receive were emptied by automation; held.
    set(100, 0, 0);
    let metric = |reason: &str| {
        let mut response = agent().get(&format!("{url}/metrics")).call().unwrap();
        let text = response.body_mut().read_to_string().unwrap();
        let series = format!(
            "tidegate_plan_trigger_refusals_total{{plan=\"az-a-failing\",reason=\"{reason}\"}}"
        );
        text.lines()
            .find_map(|l| l.strip_prefix(&series)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(
        wait_until(Duration::from_secs(10), || metric("hop_limit") >= 1.0),
        "held by the hop limit"
    );
    assert!(runs("az-a-failing").is_empty());
    assert_eq!(count(&routing(&url), "az-a"), 100);
    stop.store(true, Ordering::SeqCst);
    feeder.join().unwrap();
}

/// A drill's restore into a zone it emptied (issue 47): owning nothing, the zone reports no
/// outcomes, so its health is unknown. With nothing of it live the restore holds and says so
/// (the control: a dead zone looks the same from its outcomes); once a subscriber in the zone
/// is live (its edge or service watching), the zone counts as idle, not dead, and the restore
/// gives the map back.
#[test]
fn a_drill_restores_into_an_idle_zone_that_shows_life() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    let toml = config().replace(
        "[health]\nwindow = \"2s\"",
        "[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"\n\
         [drain.evacuate]\nstep_percent = 50.0\ninterval = \"100ms\"",
    );
    std::fs::write(&file, toml).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let url = server.url.clone();
    let (status, body) = put_units(
        &url,
        json!({"moves": [{"units": "60-99", "zone": "az-c"}], "expected_version": routing(&url)["version"], "reason": "az-c takes 40 units"}),
    );
    assert_eq!(status, 200, "{body}");
    let start = owners(&body);
    // az-c reports nothing: its health is unknown throughout.
    let stop = Arc::new(AtomicBool::new(false));
    feed(url.clone(), &[("az-a", "green", 500), ("az-b", "blue", 500)], Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(1200));
    let (status, body) = put_json(
        &format!("{url}/v1/plans/empty-az-c"),
        OPERATOR_TOKEN,
        json!({"steps": [{"type": "evacuate", "zone": "az-c", "to_percent": 0}],
               "rto": "5m", "expected_version": routing(&url)["version"], "reason": "az-c maintenance"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = post_json(
        &format!("{url}/v1/plans/empty-az-c/drill"),
        OPERATOR_TOKEN,
        json!({"reason": "drill", "hold": "500ms"}),
    );
    assert_eq!(status, 201, "{body}");
    let run = body["id"].as_u64().or(body["run"]["id"].as_u64()).expect("the drill's run ID");
    let report = || get_json(&format!("{url}/v1/plans/empty-az-c/runs/{run}")).1;

    // Control: nothing of az-c is live; the restore holds and says why.
    let held = wait_for(Duration::from_secs(20), || {
        let r = report();
        r["hold_reason"].as_str().is_some_and(|h| h.contains("nothing of it is live")).then_some(r)
    });
    assert_eq!(routing(&url)["zones"][2]["units"], 0, "{held}");
    std::thread::sleep(Duration::from_millis(1000));
    assert_ne!(report()["state"], "completed", "still held");

    // A subscriber in az-c: the zone is idle, not dead; the drill restores the map.
    let identity = tidegate::client::Identity {
        subscriber_id: "az-c-edge".into(),
        zone: "az-c".into(),
        kind: "service".into(),
    };
    let options = tidegate::client::RouterOptions {
        token: Some(OPERATOR_TOKEN.into()),
        ..Default::default()
    };
    let router = tidegate::client::Router::connect(&url, identity, options).unwrap();
    let done = wait_for(Duration::from_secs(20), || {
        let r = report();
        (r["state"] == "completed").then_some(r)
    });
    assert_eq!(owners(&routing(&url)), start, "the drill restored the map: {done}");
    drop(router);
    stop.store(true, Ordering::SeqCst);
}
