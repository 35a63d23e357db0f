//! Plans declared in config (`[plans.<name>]`) on the real binary: appended to the log at
//! start-up as `config`, not again when a restart finds the same plan, as a new revision when the
//! configuration changes it; a bad declared plan stops start-up naming its key.

mod common;

use common::*;
use serde_json::Value;

fn declared(rto: &str) -> String {
    format!(
        "[plans.az-b-failing]\nrto = \"{rto}\"\ncooldown = \"1h\"\n\
         steps = [{{type = \"evacuate\", zone = \"az-b\", to_percent = 0}}]\n\
         trigger = {{zone_down_for = \"30s\"}}\n"
    )
}

fn start(dir: &std::path::Path, rto: &str) -> Server {
    let file = dir.join("tidegate.toml");
    std::fs::write(&file, config_toml(&declared(rto))).unwrap();
    Server::start(&file, &dir.join("data"))
}

fn plan(server: &Server) -> Value {
    let (status, plan) = get_json(&format!("{}/v1/plans/az-b-failing", server.url));
    assert_eq!(status, 200, "{plan}");
    plan
}

fn version(server: &Server) -> u64 {
    get_json(&format!("{}/v1/plans", server.url)).1["version"].as_u64().unwrap()
}

#[test]
fn a_declared_plan_is_appended_once_and_again_only_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "1m");
    let p = plan(&server);
    assert_eq!(p["revision"], 1, "{p}");
    assert_eq!(p["updated_by"], "config");
    assert_eq!(p["reason"], "config");
    assert_eq!(p["rto"], "1m");
    assert_eq!(p["trigger"]["zone_down_for"], "30s", "{p}");
    assert_eq!(p["cooldown"], "1h");
    let before = version(&server);

    // The same configuration after a restart (also after kill -9): nothing is appended.
    server.kill9();
    let server = start(dir.path(), "1m");
    assert_eq!(plan(&server)["revision"], 1);
    assert_eq!(version(&server), before, "no version spent on an unchanged plan");
    server.terminate();

    // A changed configuration is a new revision, from the log's (not config's) point of view.
    let server = start(dir.path(), "2m");
    let p = plan(&server);
    assert_eq!(p["revision"], 2, "{p}");
    assert_eq!(p["rto"], "2m");
    assert_eq!(version(&server), before + 1);

    // An API edit of a declared plan would be reverted by the next start: it is refused, and
    // the answer says where the plan lives and how to stop its trigger now.
    let body = serde_json::json!({
        "expected_version": version(&server), "reason": "turn the trigger off mid-incident",
        "rto": "2m", "steps": [{"type": "evacuate", "zone": "az-b", "to_percent": 0}]
    });
    let (status, error) =
        put_json(&format!("{}/v1/plans/az-b-failing", server.url), OPERATOR_TOKEN, body);
    assert_eq!(
        (status, error["error"].as_str()),
        (409, Some("plan_declared_in_config")),
        "{error}"
    );
    let detail = error["detail"].as_str().unwrap();
    assert!(
        detail.contains("[plans.az-b-failing]") && detail.contains("/v1/automation"),
        "{detail}"
    );
    assert_eq!(plan(&server)["revision"], 2, "nothing changed");
}

/// Runs `tidegate serve` on `extra` and returns its stderr; it must fail to start.
fn start_failure(extra: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, config_toml(extra)).unwrap();
    common::refused_start(&path, &dir.path().join("data"))
}

#[test]
fn a_bad_declared_plan_names_its_key() {
    let steps = "steps = [{type = \"evacuate\", zone = \"az-b\", to_percent = 0}]";
    let cases = [
        (format!("[plans.p]\nrto = \"soon\"\n{steps}\n"), "`plans.p.rto`"),
        (
            "[plans.p]\nrto = \"1m\"\nsteps = [{type = \"evacuate\", zone = \"az-q\", to_percent = 0}]\n"
                .to_owned(),
            "`plans.p.steps[0]",
        ),
        (
            format!("[plans.p]\nrto = \"1m\"\n{steps}\ntrigger = {{zone_down_for = \"30s\"}}\n"),
            "`plans.p.cooldown`",
        ),
        (format!("[plans.p]\nrto = \"1m\"\n{steps}\ncolour = \"blue\"\n"), "`plans.p`"),
        (
            "[plans.p]\nrto = \"1m\"\nsteps = [{type = \"http\", name = \"promote\", \
             url = \"https://root:hunter2@db-admin/promote\"}]\n"
                .to_owned(),
            "`plans.p.steps[0].url`",
        ),
        (
            "[plans.p]\nrto = \"1m\"\nsteps = [{type = \"http\", name = \"promote\", \
             url = \"https://db-admin/promote\", token_env = \"Bearer x\"}]\n"
                .to_owned(),
            "`plans.p.steps[0].token_env`",
        ),
    ];
    for (toml, key) in cases {
        let stderr = start_failure(&toml);
        assert!(stderr.contains(key), "{toml}: expected {key} in {stderr}");
    }
}

/// A declared plan takes an HTTP step (the token named by its environment variable), and a
/// restart with the same configuration appends nothing: the step's stored form (timeout as
/// milliseconds) compares equal to the declared one.
#[test]
fn a_declared_plan_takes_an_http_step() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    let toml = "[plans.promote-then-evacuate]\nrto = \"5m\"\n\
                preconditions = [{name = \"primary\", http = \"http://127.0.0.1:9/primary\"}]\n\
                steps = [\n\
                {type = \"http\", name = \"promote-replica\", \
                 url = \"https://db-admin.internal/promote?zone=az-a\", \
                 token_env = \"DB_ADMIN_TOKEN\", timeout = \"5s\", retries = 3},\n\
                {type = \"wait_precondition\", name = \"primary\"},\n\
                {type = \"evacuate\", zone = \"az-b\", to_percent = 0}]\n";
    std::fs::write(&file, config_toml(toml)).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let (status, p) = get_json(&format!("{}/v1/plans/promote-then-evacuate", server.url));
    assert_eq!(status, 200, "{p}");
    let step = &p["steps"][0];
    assert_eq!(step["type"], "http", "{p}");
    assert_eq!(step["token_env"], "DB_ADMIN_TOKEN");
    assert_eq!((step["method"].as_str(), step["timeout"].as_str()), (Some("POST"), Some("5s")));
    assert_eq!(step["retries"], 3);
    let before = version(&server);
    server.terminate();
    let server = Server::start(&file, &dir.path().join("data"));
    assert_eq!(version(&server), before, "an unchanged declared plan is not appended again");
    let (_, dry) = post_json(
        &format!("{}/v1/plans/promote-then-evacuate/dry-run", server.url),
        OPERATOR_TOKEN,
        serde_json::json!({}),
    );
    let listed = dry["steps"][0]["description"].as_str().unwrap_or_default();
    assert!(listed.contains("$DB_ADMIN_TOKEN") && listed.contains("not called"), "{dry}");
}
