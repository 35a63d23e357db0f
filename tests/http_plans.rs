//! Prepared plans through `rocket::local`: stored through the log (operator, expected version,
//! reason), listed, replayed after a restart, and dry-run without changing anything.

mod common;

use common::*;
use rocket::http::{ContentType, Header, Status};
use rocket::local::blocking::{Client, LocalResponse};
use serde_json::{Value, json};

fn config() -> String {
    config_toml(
        "[health]\nwindow = \"2s\"\ndetect_window = \"1s\"\n[drain]\ntick = \"1h\"\n[capacity]\nheadroom = 0.1\n\
         [zones.az-a]\ncapacity_rps = 1000\n",
    )
}

fn send<'c>(
    client: &'c Client,
    put: bool,
    path: &str,
    token: Option<&str>,
    body: Value,
) -> LocalResponse<'c> {
    let mut request = if put { client.put(path.to_owned()) } else { client.post(path.to_owned()) };
    if let Some(token) = token {
        request = request.header(Header::new("Authorization", format!("Bearer {token}")));
    }
    request.header(ContentType::JSON).body(body.to_string()).dispatch()
}

fn version(client: &Client) -> u64 {
    let routing: Value = client.get("/v1/routing").dispatch().into_json().unwrap();
    routing["version"].as_u64().unwrap()
}

/// "az-b is failing": the database primary must already be in az-a, then evacuate az-b.
fn plan(expected_version: u64) -> Value {
    json!({
        "expected_version": expected_version,
        "reason": "reviewed in the incident drill of 2026-11",
        "rto": "1m",
        "preconditions": [{"name": "db-primary-in-az-a", "http": "http://127.0.0.1:9/primary"}],
        "steps": [
            {"type": "wait_precondition", "name": "db-primary-in-az-a"},
            {"type": "evacuate", "zone": "az-b", "to_percent": 0},
            {"type": "wait_consumed", "zone": "az-b"}
        ]
    })
}

#[test]
fn plans_are_stored_by_operators_only_through_the_log_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_in(&config(), dir.path());
    let v = version(&client);
    for (token, status) in [(None, Status::Unauthorized), (Some(VIEWER_TOKEN), Status::Forbidden)] {
        let response = send(&client, true, "/v1/plans/az-b-failing", token, plan(v));
        assert_eq!(response.status(), status);
    }
    let response = send(&client, true, "/v1/plans/az-b-failing", Some(OPERATOR_TOKEN), plan(v));
    assert_eq!(response.status(), Status::Ok);
    let stored: Value = response.into_json().unwrap();
    assert_eq!((stored["revision"].as_u64(), stored["changed"].as_bool()), (Some(1), Some(true)));
    assert_eq!(stored["rto_ms"], 60_000);
    assert_eq!(stored["updated_by"], "alice");
    assert_eq!(stored["steps"][1], json!({"type": "evacuate", "zone": "az-b", "to_percent": 0.0}));
    assert_eq!(version(&client), v + 1, "storing a plan spends a version");

    // Same plan again: nothing changes. A stale version is refused.
    let again = send(&client, true, "/v1/plans/az-b-failing", Some(OPERATOR_TOKEN), plan(v + 1));
    assert_eq!(again.into_json::<Value>().unwrap()["changed"], false);
    let stale = send(&client, true, "/v1/plans/az-b-failing", Some(OPERATOR_TOKEN), plan(v));
    assert_eq!(stale.status(), Status::Conflict);
    assert_eq!(stale.into_json::<Value>().unwrap()["error"], "version_conflict");

    let audit: Value = client.get("/v1/audit?limit=1").dispatch().into_json().unwrap();
    assert_eq!(audit["entries"][0]["action"], "plan_put");
    assert_eq!(audit["entries"][0]["reason"], "reviewed in the incident drill of 2026-11");
    drop(client);

    let client = client_in(&config(), dir.path());
    let list: Value = client.get("/v1/plans").dispatch().into_json().unwrap();
    assert_eq!(list["plans"].as_array().unwrap().len(), 1, "{list}");
    let one: Value = client.get("/v1/plans/az-b-failing").dispatch().into_json().unwrap();
    assert_eq!(one["revision"], 1);
    assert_eq!(one["preconditions"][0]["http"], "http://127.0.0.1:9/primary");
    let missing = client.get("/v1/plans/nope").dispatch();
    assert_eq!(missing.status(), Status::NotFound);
    assert_eq!(missing.into_json::<Value>().unwrap()["error"], "plan_not_found");
}

#[test]
fn invalid_plans_say_which_field_is_wrong() {
    let (client, _dir) = client_with(&config());
    let v = version(&client);
    let cases = [
        (json!([{"type": "evacuate", "zone": "az-c", "to_percent": 0}]), "steps[0].zone"),
        (json!([{"type": "dial", "blue_percent": 150}]), "steps[0].blue_percent"),
        (json!([{"type": "wait_precondition", "name": "nobody"}]), "steps[0].precondition"),
        (json!([]), "steps"),
    ];
    for (steps, field) in cases {
        let body = json!({"expected_version": v, "reason": "x", "rto": "1m", "steps": steps});
        let response = send(&client, true, "/v1/plans/p", Some(OPERATOR_TOKEN), body);
        assert_eq!(response.status(), Status::BadRequest, "{field}");
        let error: Value = response.into_json().unwrap();
        assert_eq!(error["error"], "invalid_plan");
        assert!(error["detail"].as_str().unwrap().contains(field), "{field}: {error}");
    }
    assert_eq!(version(&client), v, "refused plans spend no version");
}

#[test]
fn a_dry_run_projects_load_and_duration_and_lists_every_hold_without_changing_anything() {
    let (client, _dir) = client_with(&config());
    let v = version(&client);
    let response = send(&client, true, "/v1/plans/az-b-failing", Some(OPERATOR_TOKEN), plan(v));
    assert_eq!(response.status(), Status::Ok);
    // az-b and az-a each carry a few hundred requests per second; az-a may carry 900.
    let outcomes = json!([
        {"zone": "az-b", "color": "blue", "ok": 200, "error": 400},
        {"zone": "az-a", "color": "green", "ok": 600, "error": 0}
    ]);
    let response = send(&client, false, "/v1/outcomes", Some(OPERATOR_TOKEN), outcomes.clone());
    assert_eq!(response.status(), Status::Ok);
    // Right after the first report the load is unknown (not low): the dry run says so.
    let response = send(&client, false, "/v1/plans/az-b-failing/dry-run", None, json!({}));
    let early: Value = response.into_json().unwrap();
    assert_eq!(early["steps"][1]["capacity"]["verdict"], "unknown", "{early}");
    assert!(
        early["steps"][1]["capacity"]["detail"].as_str().unwrap().contains("not measured yet"),
        "{early}"
    );
    // Once the detection window (1 s here) is covered, the load is known.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let response = send(&client, false, "/v1/outcomes", Some(OPERATOR_TOKEN), outcomes);
    assert_eq!(response.status(), Status::Ok);

    let before = version(&client);
    let response = send(&client, false, "/v1/plans/az-b-failing/dry-run", None, json!({}));
    assert_eq!(response.status(), Status::Ok);
    let dry: Value = response.into_json().unwrap();
    assert_eq!(version(&client), before, "a dry run changes nothing");

    // The precondition's URL does not answer. A `wait_precondition` step waits for it, so it
    // gates that step, not the start: the run would start and hold at step 1 until it is true
    // ("wait for the promotion, then evacuate" used to be refused before it began).
    assert_eq!(dry["would_start"], true, "{dry}");
    assert_eq!(dry["preconditions"][0]["passed"], Value::Null);
    assert!(dry["refusals"].as_array().unwrap().is_empty(), "{dry}");
    // The evacuation moves 50 % of users; az-a would take all of az-b's load: over 900 rps.
    let evacuate = &dry["steps"][1];
    assert_eq!(evacuate["users_moved_percent"], 50.0, "{evacuate}");
    assert_eq!(
        (evacuate["blue_percent_before"].as_f64(), evacuate["blue_percent_after"].as_f64()),
        (Some(50.0), Some(0.0))
    );
    assert_eq!(evacuate["capacity"]["verdict"], "exceeds", "{evacuate}");
    assert_eq!(evacuate["capacity"]["allowed_rps"], 900.0);
    assert!(evacuate["capacity"]["projected_rps"].as_f64().unwrap() > 900.0, "{evacuate}");
    assert!(
        evacuate["holds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h.as_str().unwrap().contains("insufficient_capacity")),
        "{evacuate}"
    );
    // az-b's 67 % errors do not hold an evacuation (only the receiving zone is judged).
    assert!(
        !evacuate["holds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h.as_str().unwrap().contains("error rate")),
        "{evacuate}"
    );
    // [drain.evacuate] defaults: 25 % every 5 s, so two steps, 5 s apart, well inside the RTO.
    assert_eq!(evacuate["expected_ms"], 5000);
    assert_eq!((dry["expected_ms"].as_u64(), dry["rto_ms"].as_u64()), (Some(5000), Some(60_000)));
    assert_eq!(dry["fits_rto"], true);
    // No lanes: nothing is left to consume.
    assert_eq!(dry["backlog"]["az-b"], 0);
    assert!(dry["steps"][2]["holds"].as_array().unwrap().is_empty(), "{dry}");
    let holds: Vec<&str> =
        dry["holds"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
    assert!(holds.iter().any(|h| h.starts_with("step 1: waits: precondition")), "{holds:?}");
    assert!(
        holds.iter().any(|h| h.starts_with("step 2: would hold: insufficient_capacity")),
        "{holds:?}"
    );
}

#[test]
fn runs_are_refused_on_a_changed_revision_and_controlled_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let op = Some(OPERATOR_TOKEN);
    let run_path = "/v1/plans/pin-tester/run";
    {
        let client = client_in(&config(), dir.path());
        let body = json!({
            "expected_version": version(&client), "reason": "reviewed", "rto": "1m",
            "steps": [{"type": "pin", "user_id": "tester-1", "color": "green"}]
        });
        assert_eq!(send(&client, true, "/v1/plans/pin-tester", op, body).status(), Status::Ok);
        let stale = send(&client, false, run_path, op, json!({"reason": "r", "plan_revision": 2}));
        assert_eq!(stale.status(), Status::Conflict);
        let e: Value = stale.into_json().unwrap();
        assert_eq!(
            (e["error"].as_str(), e["current_revision"].as_u64()),
            (Some("plan_revision_changed"), Some(1))
        );
        let started = send(&client, false, run_path, op, json!({"reason": "incident"}));
        assert_eq!(started.status(), Status::Created);
        let run: Value = started.into_json().unwrap();
        assert_eq!((run["id"].as_u64(), run["state"].as_str()), (Some(1), Some("running")));
        assert_eq!((run["started_by"].as_str(), run["met"].as_bool()), (Some("alice"), None));
        let again = send(&client, false, run_path, op, json!({"reason": "twice"}));
        assert_eq!(again.status(), Status::Conflict);
        let e: Value = again.into_json().unwrap();
        assert_eq!(e["error"], "plan_run_active", "{e}");
        let drain = json!({"zone": "az-b", "target_percent": 0, "reason": "by hand"});
        let e: Value = send(&client, false, "/v1/drains", op, drain).into_json().unwrap();
        assert_eq!(e["error"], "plan_run_active", "an operator drain waits for the run: {e}");
        let path = "/v1/plans/pin-tester/runs/1/rollback";
        let rolled: Value =
            send(&client, false, path, op, json!({"reason": "undo"})).into_json().unwrap();
        assert_eq!(
            (rolled["state"].as_str(), rolled["changed"].as_bool()),
            (Some("restoring"), Some(true))
        );
        let paused =
            send(&client, false, "/v1/plans/pin-tester/runs/1/pause", op, json!({"reason": "p"}));
        assert_eq!(paused.status(), Status::Conflict);
        let e: Value = paused.into_json().unwrap();
        assert_eq!(e["error"], "plan_run_state", "{e}");
        let missing =
            send(&client, false, "/v1/plans/pin-tester/runs/9/abort", op, json!({"reason": "x"}));
        assert_eq!(missing.status(), Status::NotFound);
    }
    // After a restart the run is where the log left it.
    let client = client_in(&config(), dir.path());
    let runs: Value = client.get("/v1/plans/pin-tester/runs").dispatch().into_json().unwrap();
    assert_eq!(runs["runs"][0]["state"], "restoring", "{runs}");
    let plan: Value = client.get("/v1/plans/pin-tester").dispatch().into_json().unwrap();
    assert_eq!(plan["active_run"]["id"], 1, "{plan}");
    assert_eq!(plan["last_drill"], Value::Null);
}

#[test]
fn a_trigger_is_stored_with_the_plan_and_its_mistakes_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_in(&config(), dir.path());
    let v = version(&client);
    let steps = json!([{"type": "evacuate", "zone": "az-b", "to_percent": 0}]);
    let with = |trigger: Value, cooldown: Value| {
        json!({"expected_version": v, "reason": "x", "rto": "1m", "steps": steps,
               "trigger": trigger, "cooldown": cooldown})
    };
    let cases = [
        (with(json!({"zone_down_for": "soon"}), json!("30m")), "trigger.zone_down_for"),
        (with(json!({"lane_consumers_gone": "az-c"}), json!("30m")), "trigger.lane_consumers_gone"),
        (with(json!({}), json!("30m")), "trigger:"),
        (with(json!({"zone_down_for": "30s"}), Value::Null), "cooldown"),
        (with(json!({"zone_down_for": "30s"}), json!("0s")), "cooldown"),
        (with(Value::Null, json!("30m")), "cooldown"),
    ];
    for (body, field) in cases {
        let response = send(&client, true, "/v1/plans/p", Some(OPERATOR_TOKEN), body);
        assert_eq!(response.status(), Status::BadRequest, "{field}");
        let error: Value = response.into_json().unwrap();
        assert_eq!(error["error"], "invalid_plan");
        assert!(error["detail"].as_str().unwrap().contains(field), "{field}: {error}");
    }
    assert_eq!(version(&client), v, "refused plans spend no version");
    let body = with(json!({"zone_down_for": "30s", "lane_consumers_gone": "az-b"}), json!("30m"));
    let response = send(&client, true, "/v1/plans/p", Some(OPERATOR_TOKEN), body);
    assert_eq!(response.status(), Status::Ok);
    let stored: Value = response.into_json().unwrap();
    // lane_consumers_gone_for defaults to 30 s: a rolling restart of consumers is no incident.
    assert_eq!(
        stored["trigger"],
        json!({"zone_down_for": "30s", "zone_silent_for": null, "lane_consumers_gone": "az-b",
               "lane_consumers_gone_for": "30s"})
    );
    assert_eq!(stored["cooldown"], "30m");
    // A plan without one says so, and the trigger survives a restart (it is in the log).
    drop(client);
    let client = client_in(&config(), dir.path());
    let again: Value = client.get("/v1/plans/p").dispatch().into_json().unwrap();
    assert_eq!(again["trigger"]["zone_down_for"], "30s");
    assert_eq!(again["cooldown"], "30m");
}
