//! Real OpenFeature SDKs against `tidegate edge`: the official Python SDK with its OFREP provider
//! (PyPI) and the JavaScript server SDK with the OFREP provider (npm), installed by
//! `scripts/openfeature-sdks.sh` (run by `scripts/test.sh`). Both evaluate the colour for 10 000
//! users and must agree with `POST /v1/tag`; every OFREP error code is exercised.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::gateway::{Edge, free_port};
use common::*;
use serde_json::{Value, json};

fn sdk_dir() -> PathBuf {
    let dir = std::env::var("OPENFEATURE_SDK_DIR").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tidegate-openfeature")
    });
    assert!(
        dir.join("venv/bin/python").exists() && dir.join("js/node_modules").exists(),
        "the OpenFeature SDKs are not installed in {}: run `bash scripts/openfeature-sdks.sh` (scripts/test.sh does)",
        dir.display()
    );
    dir
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openfeature").join(name)
}

/// Runs one SDK over `cases`; one JSON value per case.
fn run_sdk(language: &str, base_url: &str, cases: &[Value], scratch: &Path) -> Vec<Value> {
    let dir = sdk_dir();
    let file = scratch.join(format!("cases-{language}.json"));
    std::fs::write(&file, serde_json::to_string(cases).unwrap()).unwrap();
    let output = match language {
        "python" => Command::new(dir.join("venv/bin/python"))
            .arg(script("evaluate.py"))
            .arg(base_url)
            .arg(&file)
            .output(),
        _ => Command::new("node")
            .arg(script("evaluate.mjs"))
            .arg(base_url)
            .arg(&file)
            .env("TIDEGATE_OFREP_JS", dir.join("js"))
            .output(),
    }
    .expect("the SDK runs");
    assert!(
        output.status.success(),
        "{language} SDK failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON line per case"))
        .collect();
    assert_eq!(lines.len(), cases.len(), "{language}: one answer per case");
    lines
}

fn random_user() -> String {
    const ALPHABET: &[char] = &['a', 'b', 'z', 'Q', '0', '7', '-', '_', '.', '@', 'é', '用'];
    let len = 1 + (rand::random::<u32>() % 24) as usize;
    (0..len).map(|_| ALPHABET[(rand::random::<u32>() as usize) % ALPHABET.len()]).collect()
}

fn case(flag: &str, user: Option<&str>) -> Value {
    json!({ "flag": flag, "targetingKey": user })
}

#[test]
fn python_and_javascript_sdks_agree_with_the_tag_for_10_000_users() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml("initial_blue_percent = 63")).unwrap();
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let (status, _) = put_json(
        &format!("{}/v1/pins/the-pinned-one", coordinator.url),
        OPERATOR_TOKEN,
        json!({"color": "green", "expected_version": 1, "reason": "sdk test"}),
    );
    assert_eq!(status, 200);
    let edge = Edge::start(&config, &coordinator.url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(2);
    let mut users: Vec<String> = (0..10_000).map(|_| random_user()).collect();
    users[0] = "the-pinned-one".into();
    let (status, tagged) =
        post_json(&format!("{}/v1/tag", edge.url), OPERATOR_TOKEN, json!({ "user_ids": users }));
    assert_eq!(status, 200);
    let tags = tagged["tags"].as_array().unwrap();
    let cases: Vec<Value> = users.iter().map(|u| case("tidegate-color", Some(u))).collect();
    // Both SDKs at once: each is a separate process, and they do not share a connection.
    let answers: Vec<(&str, Vec<Value>)> = std::thread::scope(|scope| {
        let runs: Vec<_> = ["python", "javascript"]
            .into_iter()
            .map(|language| {
                let (url, cases, scratch) = (&edge.url, &cases, dir.path());
                scope.spawn(move || (language, run_sdk(language, url, cases, scratch)))
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    for (language, answers) in answers {
        for ((user, tag), answer) in users.iter().zip(tags).zip(&answers) {
            assert_eq!(answer["value"], tag["color"], "{language}: {user}: {answer}");
            assert_eq!(answer["variant"], tag["color"], "{language}: {answer}");
            let reason = if tag["pinned"] == true { "TARGETING_MATCH" } else { "SPLIT" };
            assert_eq!(answer["reason"], reason, "{language}: {answer}");
            assert_eq!(answer["error_code"], Value::Null);
            assert_eq!(answer["metadata"]["unit"], tag["unit"], "{language}: {answer}");
            assert_eq!(answer["metadata"]["zone"], tag["zone"]);
            assert_eq!(answer["metadata"]["version"], 2);
        }
        println!(
            "{language} OFREP provider: {} evaluations agree with POST /v1/tag",
            answers.len()
        );
    }
}

#[test]
fn every_ofrep_error_code_reaches_the_sdks() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml("fallback = \"reject\"")).unwrap();
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let edge = Edge::start(&config, &coordinator.url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let long = "x".repeat(300);
    let cases = vec![
        case("no-such-flag", Some("u1")),
        case("tidegate-color", None),
        case("tidegate-color", Some(&long)),
    ];
    let expected = ["FLAG_NOT_FOUND", "TARGETING_KEY_MISSING", "INVALID_CONTEXT"];
    // An edge with no coordinator and no cache has no table: GENERAL.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let lonely = Edge::start(&config, &dead, &dir.path().join("lonely.json"), 0);
    for language in ["python", "javascript"] {
        let answers = run_sdk(language, &edge.url, &cases, dir.path());
        for (answer, code) in answers.iter().zip(expected) {
            assert_eq!(answer["error_code"], code, "{language}: {answer}");
            assert_eq!(answer["value"], "no-colour", "the SDK falls back to the caller's default");
        }
        let general =
            run_sdk(language, &lonely.url, &[case("tidegate-color", Some("u1"))], dir.path());
        assert_eq!(general[0]["error_code"], "GENERAL", "{language}: {}", general[0]);
    }
    // PARSE_ERROR needs a malformed body, which no SDK sends: over raw HTTP.
    let mut response = agent()
        .post(&format!("{}/ofrep/v1/evaluate/flags/tidegate-color", edge.url))
        .header("content-type", "application/json")
        .send("{\"context\": ")
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.body_mut().read_json().unwrap();
    assert_eq!(body["errorCode"], "PARSE_ERROR");
    assert_eq!(body["key"], "tidegate-color");
}
