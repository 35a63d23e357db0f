//! The command line against a real server: token generation, dial, pins, drains, zones, errors.

mod common;

use std::process::{Command, Output};

use common::*;

fn tidegate(args: &[&str], url: &str, token: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tidegate"));
    command.args(args).env("TIDEGATE_URL", url).env_remove("TIDEGATE_TOKEN");
    if let Some(token) = token {
        command.env("TIDEGATE_TOKEN", token);
    }
    command.output().unwrap()
}

fn ok(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn fails(output: Output) -> String {
    assert!(!output.status.success(), "should fail: {}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn token_new_prints_a_usable_operator_block() {
    let output = ok(Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["token", "new", "--name", "carol"])
        .output()
        .unwrap());
    let token =
        output.split_whitespace().find(|w| w.starts_with("tg_")).expect("a token").to_owned();
    assert_eq!(token.len(), 3 + 64);
    // The printed block is the configuration: it parses and holds the token's hash, not the token.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("carol.toml");
    std::fs::write(&config, &output).unwrap();
    assert!(output.contains(&tidegate::config::token_sha256_hex(&token)));
    assert!(!output.lines().filter(|l| !l.starts_with('#')).any(|l| l.contains(&token)));
    let server = Server::start(&config, &dir.path().join("data"));
    let changed = ok(tidegate(
        &["dial", "set", "40", "--reason", "carol's first change"],
        &server.url,
        Some(&token),
    ));
    assert!(changed.contains("blue 40%"), "{changed}");
}

#[test]
fn client_commands_print_summaries_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("t.toml");
    std::fs::write(&config, config_toml("[drain]\ninterval = \"1h\"")).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.as_str();
    let op = Some(OPERATOR_TOKEN);

    assert!(
        ok(tidegate(&["tag", "alice"], url, None)).contains("alice -> green (zone az-a, unit 80")
    );
    assert!(ok(tidegate(&["dial", "get"], url, None)).contains("version 1: blue 50%"));
    let set = ok(tidegate(&["dial", "set", "30", "--reason", "drill"], url, op));
    assert!(set.contains("was blue 50") && set.contains("blue 30%"), "{set}");
    let stale = fails(tidegate(
        &["dial", "set", "20", "--reason", "x", "--expected-version", "1"],
        url,
        op,
    ));
    assert!(stale.contains("409") && stale.contains("version_conflict"), "{stale}");
    assert!(fails(tidegate(&["dial", "set", "20", "--reason", "x"], url, None)).contains("401"));
    assert!(
        fails(tidegate(&["dial", "set", "20", "--reason", "x"], url, Some(VIEWER_TOKEN)))
            .contains("403")
    );
    assert!(
        ok(tidegate(&["pin", "qa-1", "blue", "--reason", "qa"], url, op))
            .contains("qa-1 pinned blue")
    );
    assert!(ok(tidegate(&["tag", "qa-1"], url, None)).contains("blue"));
    assert!(ok(tidegate(&["unpin", "qa-1", "--reason", "done"], url, op)).contains("unpinned"));
    let status = ok(tidegate(&["status"], url, None));
    assert!(status.contains("ready") && status.contains("unpin"), "{status}");
    let json = ok(tidegate(&["dial", "get", "--json"], url, None));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["blue_units"], 30);

    let started = ok(tidegate(
        &[
            "drain", "start", "--zone", "az-b", "--to", "0", "--step", "10", "--every", "1h",
            "--reason", "maint",
        ],
        url,
        op,
    ));
    assert!(started.contains("drain 1 of az-b"), "{started}");
    let drain_status = ok(tidegate(&["drain", "status"], url, None));
    assert!(
        drain_status.contains("[")
            && drain_status.contains("steps")
            && drain_status.contains("guard:"),
        "{drain_status}"
    );
    assert!(
        drain_status.contains("az-a") && drain_status.contains("health unknown"),
        "{drain_status}"
    );
    assert!(ok(tidegate(&["drain", "pause", "--reason", "wait"], url, op)).contains("(paused)"));
    assert!(
        ok(tidegate(&["drain", "abort", "1", "--reason", "cancel"], url, op)).contains("(aborted)")
    );
    // Once it ended, `drain status` shows the latest drain (it used to fail).
    let ended = ok(tidegate(&["drain", "status"], url, None));
    assert!(ended.contains("drain 1 of az-b") && ended.contains("(aborted)"), "{ended}");
    let zones = ok(tidegate(&["zones"], url, None));
    assert!(zones.contains("az-b") && zones.contains("az-a"), "{zones}");
    assert!(ok(tidegate(&["audit", "--limit", "3"], url, None)).contains("drain_abort"));

    let unreachable = fails(tidegate(&["dial", "get"], "http://127.0.0.1:9", None));
    assert!(unreachable.contains("cannot reach tidegate"), "{unreachable}");
}

/// `dial get` and `status` on a three-zone table: every zone with its lane, share and units, and
/// each routing domain's map (issue 48: both used to print only blue and green).
#[test]
fn dial_get_and_status_show_every_zone_of_a_three_zone_table() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("t.toml");
    // The embedded default: moves and maintenance drains freeze unless asked not to.
    std::fs::write(&config, config_toml("[freeze]\nby_default = true")).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.as_str();
    let version = || get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let two = ok(tidegate(&["dial", "get"], url, None));
    assert_eq!(
        two.trim(),
        "version 1: blue 50% (50 of 100 units) in az-b, green 50% in az-a; 0 pinned user(s)"
    );

    let (status, body) = post_json(
        &format!("{url}/v1/zones"),
        OPERATOR_TOKEN,
        serde_json::json!({"name": "az-c", "lane": "red", "expected_version": version(),
                           "reason": "a third site"}),
    );
    assert_eq!(status, 200, "{body}");
    // Added, az-c owns nothing yet: it is listed at 0 %, not left out.
    let empty = ok(tidegate(&["dial", "get"], url, None));
    assert!(empty.contains("az-c red 0% (0 units)"), "{empty}");
    let (status, body) = post_json(
        &format!("{url}/v1/domains"),
        OPERATOR_TOKEN,
        serde_json::json!({"name": "search", "expected_version": version(), "reason": "own map"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = put_json(
        &format!("{url}/v1/units"),
        OPERATOR_TOKEN,
        serde_json::json!({
            "moves": [{"units": "25-49", "zone": "az-c"},
                      {"units": "0-9", "zone": "az-c", "domain": "search"}],
            "expected_version": version(), "reason": "az-c takes a quarter"
        }),
    );
    assert_eq!(status, 200, "{body}");

    let expected = "az-b blue 25% (25 units), az-a green 50% (50 units), az-c red 25% (25 units)";
    let search = "domain search: az-b blue 40% (40 units), az-a green 50% (50 units), \
                  az-c red 10% (10 units)";
    let dial = ok(tidegate(&["dial", "get"], url, None));
    assert!(dial.starts_with(&format!("version {}: {expected}; 100 units", version())), "{dial}");
    assert!(dial.contains(search), "{dial}");
    let status = ok(tidegate(&["status"], url, None));
    assert!(status.contains(expected) && status.contains(search), "{status}");
    assert!(status.contains("ready"), "{status}");
    // The JSON is the server's table, az-c included.
    let json: serde_json::Value =
        serde_json::from_str(&ok(tidegate(&["dial", "get", "--json"], url, None))).unwrap();
    assert_eq!(json["zones"][2]["name"], "az-c");
    assert_eq!(json["zones"][2]["units"], 25);

    // A channel put frozen by default answers without the channel: the CLI reads it back.
    let put = ok(tidegate(
        &[
            "channels",
            "put",
            "orders-v2",
            "--service",
            "orders",
            "--zone",
            "az-a",
            "--percent",
            "10",
            "--reason",
            "canary",
        ],
        url,
        Some(OPERATOR_TOKEN),
    ));
    assert!(put.contains("orders-v2 [default] orders: 10% of users (units "), "{put}");
    assert!(put.contains("loss-less (frozen by default)"), "{put}");

    // `drain start --no-freeze` steps at once where the server would freeze by default.
    let started = ok(tidegate(
        &[
            "drain",
            "start",
            "--zone",
            "az-c",
            "--to",
            "0",
            "--every",
            "1h",
            "--no-freeze",
            "--reason",
            "maint",
        ],
        url,
        Some(OPERATOR_TOKEN),
    ));
    assert!(started.contains("drain 1 of az-c"), "{started}");
    let drain: serde_json::Value =
        serde_json::from_str(&ok(tidegate(&["drain", "status", "--json"], url, None))).unwrap();
    assert_eq!(drain["drain"]["freeze"]["enabled"], false, "{drain}");
    // The client options go after a subcommand of `zones`, `plans` or `automation` too.
    let aborted =
        ok(tidegate(&["drain", "abort", "--reason", "test over"], url, Some(OPERATOR_TOKEN)));
    assert!(aborted.contains("(aborted)"), "{aborted}");
    let plans = ok(tidegate(&["plans", "list", "--json"], url, None));
    assert!(serde_json::from_str::<serde_json::Value>(&plans).is_ok(), "{plans}");
}

#[test]
fn plans_list_show_and_dry_run_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("t.toml");
    std::fs::write(
        &config,
        config_toml("[drain]\ninterval = \"1h\"\n[zones.az-a]\ncapacity_rps = 100000"),
    )
    .unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.as_str();
    assert!(ok(tidegate(&["plans"], url, None)).contains("no plans"));
    let version = get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let (status, body) = put_json(
        &format!("{url}/v1/plans/az-b-failing"),
        OPERATOR_TOKEN,
        serde_json::json!({
            "expected_version": version, "reason": "reviewed", "rto": "2m",
            "steps": [{"type": "evacuate", "zone": "az-b", "to_percent": 0}]
        }),
    );
    assert_eq!(status, 200, "{body}");
    let list = ok(tidegate(&["plans", "list"], url, None));
    assert!(
        list.contains("az-b-failing (revision 1): 1 step(s), 0 precondition(s), RTO 2m"),
        "{list}"
    );
    let show = ok(tidegate(&["plans", "show", "az-b-failing"], url, None));
    assert!(show.contains("\"type\":\"evacuate\""), "{show}");
    // No outcomes yet: az-a's load is unknown, so the capacity check holds, and the dry run says so.
    let dry = ok(tidegate(&["plans", "dry-run", "az-b-failing"], url, None));
    assert!(dry.contains("would start; expected 5s against an RTO of 2m (fits)"), "{dry}");
    assert!(dry.contains("blue 50% -> 0% (50% of users move)"), "{dry}");
    assert!(dry.contains("hold: step 1: would hold: insufficient_capacity"), "{dry}");
    assert!(dry.contains("current load is unknown"), "{dry}");
    let missing = fails(tidegate(&["plans", "dry-run", "nope"], url, None));
    assert!(missing.contains("plan_not_found"), "{missing}");
}

/// A URL nothing listens on: a port that was free a moment ago.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

#[test]
fn several_servers_are_tried_in_turn_on_connection_errors_but_an_http_error_is_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("t.toml");
    std::fs::write(&config, config_toml("")).unwrap();
    let a = Server::start(&config, &dir.path().join("data-a"));
    let b = Server::start(&config, &dir.path().join("data-b"));
    let op = Some(OPERATOR_TOKEN);
    // The first coordinator is dead: reads and writes go to the next one.
    let servers = format!("{},{}/", dead_url(), a.url);
    assert!(ok(tidegate(&["dial", "get"], &servers, None)).contains("version 1: blue 50%"));
    let set = ok(tidegate(&["dial", "set", "30", "--reason", "failover drill"], &servers, op));
    assert!(set.contains("blue 30%"), "{set}");
    let table = ok(tidegate(&["cluster"], &servers, None));
    assert!(table.contains(&format!("at {}", a.url)), "the table names who answered: {table}");
    assert!(table.contains("LIVE") && table.contains("log: file"), "{table}");
    // A refusal is an answer: a 409 from `a` is not retried on `b` (where it would succeed).
    let both = format!("{},{}", a.url, b.url);
    let stale = fails(tidegate(
        &["dial", "set", "20", "--reason", "x", "--expected-version", "1"],
        &both,
        op,
    ));
    assert!(stale.contains("409"), "{stale}");
    assert!(ok(tidegate(&["dial", "get"], &b.url, None)).contains("version 1: blue 50%"));
    // A stopped (SIGSTOP) first coordinator still accepts connections: a read moves on after its
    // 5 s timeout.
    let stopped = Server::start(&config, &dir.path().join("data-c"));
    let pid = stopped.child.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let hung = format!("{},{}", stopped.url, a.url);
    assert!(ok(tidegate(&["dial", "get"], &hung, None)).contains("blue 30%"));
    assert!(Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    // Every coordinator dead: one error naming each.
    let (d1, d2) = (dead_url(), dead_url());
    let err = fails(tidegate(&["dial", "get"], &format!("{d1},{d2}"), None));
    assert!(err.contains(&d1) && err.contains(&d2) && err.contains("cannot reach"), "{err}");
    // A malformed list is refused, naming the flag.
    assert!(fails(tidegate(&["dial", "get"], "a.example,", None)).contains("--server"));
}

#[test]
fn plans_run_drill_report_and_control_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("t.toml");
    std::fs::write(
        &config,
        config_toml("[drain]\ntick = \"20ms\"\n[zones.az-a]\ncapacity_rps = 100000"),
    )
    .unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.as_str();
    let op = Some(OPERATOR_TOKEN);
    for (name, step) in [
        ("pin-tester", serde_json::json!({"type": "pin", "user_id": "tester-1", "color": "green"})),
        ("az-b-failing", serde_json::json!({"type": "evacuate", "zone": "az-b", "to_percent": 0})),
    ] {
        let version = get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
        let (status, body) = put_json(
            &format!("{url}/v1/plans/{name}"),
            OPERATOR_TOKEN,
            serde_json::json!({
                "expected_version": version, "reason": "reviewed", "rto": "1m", "steps": [step]
            }),
        );
        assert_eq!(status, 200, "{body}");
    }
    // `tidegate drill NAME` is `tidegate plans drill NAME`; `--wait` follows it to its end.
    let output = tidegate(
        &[
            "drill",
            "pin-tester",
            "--hold",
            "200ms",
            "--reason",
            "drill",
            "--wait",
            "--timeout",
            "20s",
        ],
        url,
        op,
    );
    let progress = String::from_utf8_lossy(&output.stderr).into_owned();
    let drill = ok(output);
    assert!(drill.contains("started drill 1 of pin-tester (revision 1)"), "{drill}");
    assert!(drill.contains(": completed;"), "--wait printed the end: {drill}");
    assert!(progress.contains("run 1: "), "--wait printed the steps: {progress}");
    let report = ok(tidegate(&["plans", "report", "pin-tester", "1"], url, None));
    assert!(report.contains("1. pin tester-1 to green: started +"), "{report}");
    assert!(report.contains("2. restore the starting table"), "{report}");
    assert!(report.contains("(met)"), "{report}");
    let list = ok(tidegate(&["plans"], url, None));
    assert!(list.contains("pin-tester") && list.contains("last drill: run 1 completed"), "{list}");
    assert!(list.contains("az-b-failing") && list.contains("never drilled"), "{list}");
    let pins = get_json(&format!("{url}/v1/routing")).1["pins"].clone();
    assert_eq!(pins, serde_json::json!({}), "the drill restored the pins");

    // No outcomes: az-a's load is unknown, so the evacuation holds; pause, then abort it.
    // `--wait --timeout` gives up on a run that holds, exit status 1, and leaves it running.
    let output = tidegate(
        &["plans", "run", "az-b-failing", "--reason", "incident", "--wait", "--timeout", "1500ms"],
        url,
        op,
    );
    let run = String::from_utf8_lossy(&output.stdout).into_owned();
    let gave_up = fails(output);
    assert!(run.contains("started run 2 of az-b-failing"), "{run}");
    assert!(gave_up.contains("gave up waiting after 1500ms"), "{gave_up}");
    assert!(gave_up.contains("held:"), "the hold was shown while waiting: {gave_up}");
    let refused = fails(tidegate(&["drill", "pin-tester", "--reason", "again"], url, op));
    assert!(refused.contains("plan_run_active"), "{refused}");
    let paused =
        ok(tidegate(&["plans", "control", "az-b-failing", "pause", "--reason", "wait"], url, op));
    assert!(paused.contains("run 2 of az-b-failing (revision 1): paused"), "{paused}");
    let aborted =
        ok(tidegate(&["plans", "control", "az-b-failing", "abort", "--reason", "stop"], url, op));
    assert!(aborted.contains(": aborted;") && aborted.contains("(missed)"), "{aborted}");
    let json = ok(tidegate(&["plans", "--json", "report", "az-b-failing"], url, None));
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!((report["id"].as_u64(), report["outcome"].as_str()), (Some(2), Some("aborted")));
    let viewer = fails(tidegate(&["plans", "run", "az-b-failing", "--reason", "x"], url, None));
    assert!(viewer.contains("unauthorized"), "{viewer}");
}

#[test]
fn automation_is_stopped_shown_and_started_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("t.toml");
    std::fs::write(&config, config_toml("[plans]\ntriggers = true\nauto_window = \"5m\"")).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.as_str();
    let op = Some(OPERATOR_TOKEN);
    let status = ok(tidegate(&["automation"], url, None));
    assert!(status.starts_with("automation on"), "{status}");
    assert!(status.contains("one automatic run per 5m"), "{status}");
    // A viewer cannot stop it; an operator can, with a reason, and it is audited.
    let refused =
        fails(tidegate(&["automation", "stop", "--reason", "x"], url, Some(VIEWER_TOKEN)));
    assert!(refused.contains("forbidden") || refused.contains("403"), "{refused}");
    let stopped = ok(tidegate(&["automation", "stop", "--reason", "manual db failover"], url, op));
    assert!(stopped.contains("automation stopped by alice: manual db failover"), "{stopped}");
    assert!(ok(tidegate(&["automation", "status"], url, None)).contains("stopped by alice"));
    let started = ok(tidegate(&["automation", "start", "--reason", "handled"], url, op));
    assert!(started.starts_with("automation on"), "{started}");
    let (_, audit) = get_json(&format!("{url}/v1/audit?limit=5"));
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(&actions[..2], ["automation_arm", "automation_stop"], "{audit}");
}

/// `tidegate ARGS --help`.
fn help(args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.push("--help");
    ok(Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(&all)
        .env_remove("TIDEGATE_URL")
        .output()
        .unwrap())
}

/// The subcommands a `--help` lists (`help` left out).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The long flags a `--help` defines (`--help` and `--version` left out).
fn flags(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("-h, ").or_else(|| l.strip_prefix("-V, ")).unwrap_or(l);
            let name: String = l
                .strip_prefix("--")?
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            (!name.is_empty() && name != "help" && name != "version").then(|| format!("--{name}"))
        })
        .collect()
}

/// docs/src/cli.md against the binary (issue 48: it documented `drain start --no-freeze` before
/// the binary had it and left out `--receivers` and `automation`). Each line of the page's
/// synopsis must name commands that exist, with flags they take; each command and flag of
/// `tidegate --help` must be on the page (the client options in its prose).
#[test]
fn docs_cli_md_matches_the_binary() {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/cli.md")).unwrap();
    let synopsis: Vec<&str> = page
        .split("```\n")
        .nth(1)
        .expect("a synopsis block")
        .lines()
        .filter(|l| l.starts_with("tidegate "))
        .collect();
    assert!(synopsis.len() > 20, "{synopsis:?}");
    let client_options = ["--server", "--config", "--token", "--ca-file", "--json"];
    for option in client_options {
        assert!(page.contains(&format!("`{option}")), "the page's prose names {option}");
    }
    let top = subcommands(&help(&[]));
    let mut problems = Vec::new();
    // Each documented path (`dial set`) with the flags its lines show.
    let mut documented: std::collections::BTreeMap<Vec<String>, Vec<String>> = Default::default();
    for line in &synopsis {
        let words: Vec<&str> = line.split_whitespace().collect();
        let command = words[1];
        if !top.iter().any(|c| c == command) {
            problems.push(format!("`{line}`: no command `{command}` in `tidegate --help`"));
            continue;
        }
        let subs = subcommands(&help(&[command]));
        // `set`, `pause|resume`, `[list]`: one path each; no subcommand word: the command itself.
        let mut paths = vec![vec![command.to_owned()]];
        if let Some(word) = words.get(2) {
            let bare = word.trim_start_matches('[').trim_end_matches(']');
            let named: Vec<&str> = bare.split('|').collect();
            if !subs.is_empty()
                && !word.starts_with("--")
                && !word.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            {
                if named.iter().all(|n| subs.iter().any(|s| s == n)) {
                    let optional = word.starts_with('[');
                    paths =
                        named.iter().map(|n| vec![command.to_owned(), (*n).to_owned()]).collect();
                    if optional {
                        paths.push(vec![command.to_owned()]);
                    }
                } else {
                    problems.push(format!(
                        "`{line}`: `{word}` is not a subcommand of `{command}` ({subs:?})"
                    ));
                    continue;
                }
            }
        }
        let shown: Vec<String> = line
            .split(|c: char| c.is_whitespace() || "[]()|".contains(c))
            .filter(|w| w.starts_with("--"))
            .map(|w| w.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect())
            .collect();
        for path in paths {
            let args: Vec<&str> = path.iter().map(String::as_str).collect();
            let takes = flags(&help(&args));
            for flag in &shown {
                if !takes.contains(flag) {
                    problems.push(format!("`{line}`: `tidegate {}` has no {flag}", path.join(" ")));
                }
            }
            documented.entry(path).or_default().extend(shown.iter().cloned());
        }
    }
    // The other way: every command, subcommand and flag of the binary is on the page.
    for command in &top {
        let subs = subcommands(&help(&[command]));
        let mut paths: Vec<Vec<String>> =
            subs.iter().map(|s| vec![command.clone(), s.clone()]).collect();
        if subs.is_empty() {
            paths.push(vec![command.clone()]);
        }
        for path in paths {
            let Some(shown) = documented.get(&path) else {
                problems.push(format!("`tidegate {}` is not on the page", path.join(" ")));
                continue;
            };
            let args: Vec<&str> = path.iter().map(String::as_str).collect();
            let text = help(&args);
            let is_client = text.contains("--server");
            for flag in flags(&text) {
                let in_prose = is_client && client_options.contains(&flag.as_str());
                if shown.contains(&flag) || in_prose {
                    continue;
                }
                problems
                    .push(format!("`tidegate {}` takes {flag}, not on the page", path.join(" ")));
            }
        }
    }
    assert!(problems.is_empty(), "docs/src/cli.md and the binary differ:\n{}", problems.join("\n"));
}
