//! Every `curl` line in the README and the manual works as printed (issue 26): each one that
//! sends a body carries `Content-Type: application/json` (tidegate answers 415 otherwise), the
//! manual's walkthrough is the README's, and the README's five-minute walkthrough runs, line by
//! line, against the real binary, every `curl` of it failing the test on an HTTP error; so do
//! the sections that continue from it ("More than two zones", "A release of one service"), whose
//! printed outputs must be what the binary prints (issue 48).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shell code blocks (```sh) of a Markdown file, each as its lines.
fn sh_blocks(path: &Path) -> Vec<Vec<String>> {
    sh_blocks_of(&std::fs::read_to_string(path).unwrap())
}

/// The shell code blocks (```sh) of Markdown text, each as its lines.
fn sh_blocks_of(text: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim_start().starts_with("```sh") => current = Some(Vec::new()),
            Some(block) if line.trim_start().starts_with("```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => block.push(line.to_owned()),
            None => {}
        }
    }
    blocks
}

/// The commands of a shell block, with `\` continuations joined.
fn commands(block: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in block {
        let trimmed = line.trim_end();
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        out.push(std::mem::take(&mut pending));
    }
    out
}

fn documents() -> Vec<PathBuf> {
    let mut docs = vec![root().join("README.md")];
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root().join("docs/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    docs.extend(chapters);
    docs
}

#[test]
fn every_curl_that_sends_a_body_says_it_is_json() {
    let mut checked = 0;
    let mut missing = Vec::new();
    for doc in documents() {
        for block in sh_blocks(&doc) {
            for command in commands(&block) {
                let command = command.trim_start();
                if !command.starts_with("curl ") {
                    continue;
                }
                let sends = [" -d ", " --data", " -X PUT", " -X POST", " -X DELETE"]
                    .iter()
                    .any(|flag| command.contains(flag));
                if !sends {
                    continue;
                }
                checked += 1;
                if !command.contains("Content-Type: application/json") {
                    missing.push(format!("{}: {command}", doc.display()));
                }
            }
        }
    }
    assert!(checked >= 6, "found only {checked} curl lines that send a body");
    assert!(
        missing.is_empty(),
        "curl lines without the JSON content type:\n{}",
        missing.join("\n")
    );
}

/// The README's walkthrough block: the ```sh block right after "## Five-minute walkthrough".
fn walkthrough(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let after = text.split("## Five-minute walkthrough").nth(1).expect("a walkthrough section");
    let block = after.split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    block.lines().map(str::to_owned).collect()
}

#[test]
fn the_manual_walkthrough_is_the_readme_walkthrough() {
    assert_eq!(
        walkthrough(&root().join("docs/src/introduction.md")),
        walkthrough(&root().join("README.md")),
        "docs/src/introduction.md and README.md must show the same walkthrough"
    );
}

/// The README's shell blocks after the walkthrough ("More than two zones", "A release of one
/// service"), which continue from where it ends.
fn after_walkthrough(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let after = text.split("## Five-minute walkthrough").nth(1).expect("a walkthrough section");
    sh_blocks_of(after).into_iter().skip(1).collect()
}

#[test]
fn the_readme_walkthrough_runs_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::gateway::free_port();
    let bin = env!("CARGO_BIN_EXE_tidegate");
    let url = format!("http://127.0.0.1:{port}");
    let mut script = vec![
        "set -euo pipefail".to_owned(),
        format!("export TIDEGATE_URL={url}"),
        "trap 'kill $SERVE_PID 2>/dev/null || true' EXIT".to_owned(),
    ];
    let readme = root().join("README.md");
    let later = after_walkthrough(&readme);
    assert!(
        later.len() >= 3,
        "the sections after the walkthrough have {} shell blocks",
        later.len()
    );
    // What those blocks print under a command (`# {"user_id":...}`, `# version ...`) is the output.
    let printed_later: Vec<String> = later
        .iter()
        .flatten()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.starts_with('{') || l.starts_with("version "))
        .map(str::to_owned)
        .collect();
    assert!(printed_later.len() >= 3, "{printed_later:?}");
    if later.iter().flatten().any(|l| l.contains("| jq ")) {
        script.push(
            "command -v jq >/dev/null || { echo 'the README reads versions with jq: install it' >&2; exit 1; }"
                .to_owned(),
        );
    }
    let mut curls = 0;
    let mut lines = commands(&walkthrough(&readme));
    for block in &later {
        lines.extend(commands(block));
    }
    for command in lines {
        let trimmed = command.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        // The documented commands, on the test's binary and port instead of cargo's and 8080.
        let mut line = command
            .replace("cargo run --release -- ", &format!("{bin} "))
            .replace("http://127.0.0.1:8080", &url);
        if line.contains(" serve ") {
            // Step 2 runs in another terminal: here in the background, until it is ready.
            line = format!(
                "{line} --port {port} --data-dir data > serve.log 2>&1 & SERVE_PID=$!\n\
                 for _ in $(seq 100); do curl -sf {url}/readyz >/dev/null && break; sleep 0.1; done"
            );
        }
        if line.trim_start().starts_with("curl ") {
            curls += 1;
            // As printed, but an HTTP error (415, 409, 401 ...) fails the script.
            line = line.replacen("curl -s", "curl -sS --fail-with-body", 1);
            line = format!("{line}; echo");
        }
        script.push(line);
    }
    assert!(curls >= 10, "the walkthrough and what follows have {curls} curl lines");
    let out = Command::new("bash")
        .args(["-c", &script.join("\n")])
        .current_dir(dir.path())
        .env_remove("TIDEGATE_TOKEN")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let serve_log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "the walkthrough failed:\n{}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- serve\n{serve_log}",
        script.join("\n")
    );
    // Step 3's answer is the one the README prints under it.
    let printed = walkthrough(&root().join("README.md"))
        .into_iter()
        .find_map(|l| {
            l.strip_prefix("# {\"user_id\":\"alice\"")
                .map(|rest| format!("{{\"user_id\":\"alice\"{rest}"))
        })
        .expect("the walkthrough prints alice's tag");
    assert!(stdout.lines().any(|l| l == printed), "expected {printed} in:\n{stdout}");
    assert!(
        stdout.contains("\"blue_percent\":30") || stdout.contains("\"blue_percent\":30.0"),
        "{stdout}"
    );
    // The sections after it: three zones, a domain, a channel, each output as printed.
    for line in &printed_later {
        assert!(stdout.lines().any(|l| l == line), "expected {line} in:\n{stdout}");
    }
}
