//! Tidy checks that keep the architecture invariants true (run by `cargo test`).

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Lines of code outside comments, for pattern checks.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l))
}

#[test]
fn the_core_does_no_io_and_knows_no_frameworks() {
    let forbidden = [
        "tokio",
        "rocket",
        "rdkafka",
        "serde",
        "std::fs",
        "std::net",
        "std::io",
        "SystemTime",
        "Instant",
        "rand::",
        "thread_rng",
        "std::env",
        "metrics::",
        "println!",
        "eprintln!",
    ];
    let files = rust_files(&root().join("crates/tidegate-core/src"));
    assert!(files.len() >= 5, "the core moved?");
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&text) {
            for word in forbidden {
                assert!(
                    !line.contains(word),
                    "{}:{n} uses `{word}` in the pure core: {line}",
                    file.display()
                );
            }
        }
    }
}

/// Every Rust file of the server crate and of the layer crates.
fn all_source_files() -> Vec<PathBuf> {
    let mut files = rust_files(&root().join("src"));
    files.extend(rust_files(&root().join("crates")));
    files
}

/// What `cargo tree` says a workspace crate depends on (normal dependencies, all platforms).
fn dependency_names(package: &str, features: &[&str]) -> Vec<String> {
    let mut cmd = std::process::Command::new(env!("CARGO"));
    cmd.args(["tree", "--offline", "-e", "normal", "--prefix", "none", "-p", package]);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    let out = cmd.current_dir(root()).output().expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn the_layer_crates_are_kept_apart_by_their_dependency_trees() {
    // A service that embeds the Router compiles neither a web framework nor librdkafka nor an
    // async runtime; the core compiles nothing that does I/O.
    let client = dependency_names("tidegate-client", &[]);
    assert!(client.contains(&"tidegate-core".to_owned()), "{client:?}");
    for framework in ["rocket", "rdkafka", "rdkafka-sys", "tokio", "hyper"] {
        assert!(!client.contains(&framework.to_owned()), "tidegate-client depends on {framework}");
    }
    // The `kafka` feature (the lane producer and consumer) brings librdkafka and tokio, and
    // still no web framework.
    let kafka = dependency_names("tidegate-client", &["kafka"]);
    for needed in ["rdkafka", "rdkafka-sys", "tokio"] {
        assert!(
            kafka.contains(&needed.to_owned()),
            "tidegate-client --features kafka lacks {needed}: {kafka:?}"
        );
    }
    for framework in ["rocket", "hyper"] {
        assert!(
            !kafka.contains(&framework.to_owned()),
            "tidegate-client --features kafka depends on {framework}"
        );
    }
    let core = dependency_names("tidegate-core", &[]);
    let allowed = [
        "tidegate-core",
        "thiserror",
        "thiserror-impl",
        "xxhash-rust",
        "proc-macro2",
        "quote",
        "syn",
        "unicode-ident",
    ];
    for dep in &core {
        assert!(
            allowed.contains(&dep.as_str()),
            "tidegate-core depends on {dep}: the core stays pure"
        );
    }
}

#[test]
fn only_the_http_module_knows_rocket() {
    for file in all_source_files() {
        let rel = file.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        if rel.starts_with("src/http/") {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&text) {
            assert!(!line.contains("rocket::"), "{rel}:{n} names Rocket outside src/http: {line}");
        }
    }
}

/// Where rdkafka may be named: the server's Kafka module, and the client crate's `kafka`
/// feature (the lane producer and consumer services embed).
const KAFKA_MODULES: [&str; 2] = ["src/mq/", "crates/tidegate-client/src/kafka"];

#[test]
fn only_the_mq_modules_know_rdkafka() {
    for file in all_source_files() {
        let rel = file.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        if KAFKA_MODULES.iter().any(|m| rel.starts_with(m)) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&text) {
            assert!(
                !line.contains("rdkafka"),
                "{rel}:{n} names rdkafka outside {KAFKA_MODULES:?}: {line}"
            );
        }
    }
    assert!(root().join("src/mq/mod.rs").exists(), "the mq module moved?");
    assert!(
        root().join("crates/tidegate-client/src/kafka/mod.rs").exists(),
        "the client's kafka module moved?"
    );
}

#[test]
fn every_module_says_what_it_is_for() {
    for file in all_source_files().into_iter().chain(rust_files(&root().join("tests"))) {
        let text = fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("//!"),
            "{} must open with a `//!` line saying what it is for",
            file.display()
        );
    }
}

#[test]
fn no_test_is_ignored_and_no_code_is_unsafe() {
    let ignore_attr = ["#[", "ignore]"].concat();
    let unsafe_block = ["unsafe", " {"].concat();
    for file in all_source_files().into_iter().chain(rust_files(&root().join("tests"))) {
        let text = fs::read_to_string(&file).unwrap();
        assert!(!text.contains(&ignore_attr), "{} ignores a test", file.display());
        assert!(!text.contains(&unsafe_block), "{} has unsafe code", file.display());
    }
    let lib = fs::read_to_string(root().join("src/lib.rs")).unwrap();
    assert!(lib.contains("#![forbid(unsafe_code)]"));
}

#[test]
fn every_metric_recorded_is_described() {
    let described: Vec<&str> =
        tidegate::telemetry::METRICS.iter().map(|(_, name, _)| *name).collect();
    for file in all_source_files() {
        let text = fs::read_to_string(&file).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("\"tidegate_") {
            let tail = &rest[at + 1..];
            let end = tail.find('"').unwrap();
            let name = &tail[..end];
            assert!(
                described.contains(&name),
                "{} records `{name}`, which telemetry::METRICS does not list",
                file.display()
            );
            rest = &tail[end..];
        }
    }
    for (kind, name, help) in tidegate::telemetry::METRICS {
        assert!(help.len() > 10, "{name} needs a real help text");
        match *kind {
            "counter" => assert!(name.ends_with("_total"), "counter {name} must end in _total"),
            "histogram" => {
                assert!(name.ends_with("_seconds"), "histogram {name} must be in seconds")
            }
            _ => assert!(!name.ends_with("_total"), "gauge {name} must not end in _total"),
        }
    }
}

/// The layers of `src/lib.rs`, lowest first. A module may name its own layer and those before
/// it, never one after it: core -> client -> (telemetry, duration, config) -> store -> service ->
/// edges.
/// `core` and `client` are crates of their own (`crates/`), so the compiler already keeps them
/// from looking up; here they are the layers the server's modules may use.
const LAYERS: &[(&str, &[&str])] = &[
    ("core", &["core"]),
    ("client", &["client"]),
    ("base", &["telemetry", "logging", "duration", "config"]),
    ("store", &["store"]),
    ("service", &["service"]),
    ("edge", &["http", "http_fast", "mq", "cli", "edge", "fence", "server", "demo"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

#[test]
fn layers_only_look_down() {
    for file in rust_files(&root().join("src")) {
        let rel = file.strip_prefix(root().join("src")).unwrap().to_string_lossy().into_owned();
        let top = rel.split(['/', '.']).next().unwrap();
        let Some(own) = layer_of(top) else { continue };
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&text) {
            let mut rest = line;
            while let Some(at) = rest.find("crate::") {
                let tail = &rest[at + "crate::".len()..];
                let name: String =
                    tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if let Some(theirs) = layer_of(&name) {
                    // Edges are one layer, but only the CLI and the wiring itself start the
                    // wiring (`serve`, `demo`).
                    let wiring = ["server", "demo"].contains(&name.as_str())
                        && !["cli", "server", "demo"].contains(&top);
                    assert!(
                        theirs <= own && !wiring,
                        "src/{rel}:{n}: the {} layer (`{top}`) uses `{name}` from the {} layer above it: {line}",
                        LAYERS[own].0,
                        LAYERS[theirs].0
                    );
                }
                rest = tail;
            }
        }
    }
    assert!(root().join("src/service/mod.rs").exists(), "the service layer moved?");
}
