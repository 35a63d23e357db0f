//! Audit paging helpers: a long file log written as the coordinator would, and a client that
//! pages `GET /v1/audit` back to version 1.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tidegate::core::{Audit, Command as Cmd, Envelope, State, ZoneId};
use tidegate::store::{LOG_FILE, LogEntry, encode_line};

/// What the audit and the export must agree on.
pub type Row = (u64, String, String, String, String, String, u64);

/// Writes a file log of a genesis and `changes` changes (dial moves, and a pin of one of 100 users every 7th) under
/// the configuration's genesis, as the coordinator itself would have logged them.
pub fn write_log(toml: &str, data_dir: &Path, changes: usize) {
    let config = super::config(toml, data_dir);
    std::fs::create_dir_all(data_dir).unwrap();
    let audit = Audit { by: "tidegate".into(), at_ms: 1_000, reason: "first start".into() };
    let genesis = LogEntry::genesis_pinned(&config.genesis, &audit, "log-audit".into(), None);
    let mut out = encode_line(&genesis).unwrap();
    let mut state = State::genesis(config.genesis, config.zones.clone()).unwrap();
    let units = state.table().units() as usize;
    for n in 0..changes {
        let command = if n % 7 == 6 {
            // A hundred users, pinned to blue and green in turn (the pin count is bounded).
            let k = n / 7;
            let color = if (k / 100) % 2 == 0 { ZoneId::BLUE } else { ZoneId::GREEN };
            Cmd::Pin { user_id: format!("user-{}", k % 100), color }
        } else {
            Cmd::SetBlueUnits { blue_units: (1 + n % (units - 1).min(50)) as u32, domain: None }
        };
        let envelope = Envelope {
            expected_version: state.version(),
            command,
            audit: Audit {
                by: format!("op{}", n % 3),
                at_ms: 2_000 + n as u64,
                reason: format!("change {n}"),
            },
        };
        let (next, applied) = state.apply(&envelope).unwrap().expect("every change changes");
        out.push_str(
            &encode_line(&LogEntry::change(
                &envelope,
                applied.version,
                &applied.from,
                &applied.to,
                state.table().zones(),
            ))
            .unwrap(),
        );
        state = next;
    }
    std::fs::write(data_dir.join(LOG_FILE), out).unwrap();
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// `GET url` with a token: status, `Retry-After`, body.
pub fn get(url: &str, token: Option<&str>) -> (u16, Option<String>, Value) {
    let mut req = agent().get(url);
    if let Some(token) = token {
        req = req.header("Authorization", &format!("Bearer {token}"));
    }
    let mut response = req.call().expect("request sent");
    let status = response.status().as_u16();
    let retry = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (status, retry, response.body_mut().read_json().expect("JSON body"))
}

pub fn row(e: &Value) -> Row {
    (
        e["version"].as_u64().unwrap(),
        e["action"].as_str().unwrap().to_owned(),
        e["from"].as_str().unwrap().to_owned(),
        e["to"].as_str().unwrap().to_owned(),
        e["reason"].as_str().unwrap().to_owned(),
        e["by"].as_str().unwrap().to_owned(),
        e["at_ms"].as_u64().unwrap(),
    )
}

/// Pages from the newest record to version 1 with pages of `limit`; every page, in order.
pub fn page_all(base: &str, token: &str, limit: usize) -> Vec<Vec<Row>> {
    let mut pages = Vec::new();
    let mut sources = Vec::new();
    let mut before: Option<u64> = None;
    loop {
        let url = match before {
            Some(b) => format!("{base}/v1/audit?limit={limit}&before={b}"),
            None => format!("{base}/v1/audit?limit={limit}"),
        };
        let (status, _, body) = get(&url, Some(token));
        assert_eq!(status, 200, "{url}: {body}");
        let page: Vec<Row> = body["entries"].as_array().unwrap().iter().map(row).collect();
        sources.push(body["source"].as_str().unwrap().to_owned());
        let next = body["next_before"].as_u64();
        match (page.last(), next) {
            (Some(last), Some(next)) => {
                assert_eq!(next, last.0, "the cursor is the oldest version")
            }
            (Some(last), None) => assert_eq!(last.0, 1, "the cursor ends only at version 1"),
            (None, _) => panic!("{url}: an empty page before version 1"),
        }
        pages.push(page);
        match next {
            Some(next) => before = Some(next),
            None => {
                // Newest pages from memory, then (on a history longer than it) from the log.
                let first_log = sources.iter().position(|s| s == "log").unwrap_or(sources.len());
                assert!(sources[..first_log].iter().all(|s| s == "memory"), "{sources:?}");
                assert!(sources[first_log..].iter().all(|s| s == "log"), "{sources:?}");
                if pages.iter().map(Vec::len).sum::<usize>() > tidegate::store::AUDIT_IN_MEMORY {
                    assert!(first_log < sources.len(), "the oldest pages come from the log");
                }
                return pages;
            }
        }
    }
}

/// Checks that the pages hold every version from `newest` down to 1 exactly once, newest first.
pub fn check_whole(pages: &[Vec<Row>], newest: u64) {
    let versions: Vec<u64> = pages.iter().flatten().map(|r| r.0).collect();
    let expected: Vec<u64> = (1..=newest).rev().collect();
    assert_eq!(versions.len(), expected.len(), "every version once");
    assert!(versions == expected, "versions newest first, each once");
}
