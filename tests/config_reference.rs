//! The configuration reference (docs/src/reference/configuration.md) and the code agree (issue
//! 26): every key the code has is documented with the code's own default, every documented key is
//! one the binary accepts, and config/tidegate.toml shows the same defaults.
//!
//! Where the keys come from:
//! - the defaults: `Settings::default()` serialised, the same value `Config::load` starts from;
//! - the keys of each table: the real binary. A config with an unknown key in a table stops
//!   `tidegate serve` with serde's "unknown field ..., expected one of `a`, `b`" naming every key
//!   the table's struct accepts, including those with no default (`server.fast_port`,
//!   `[server.tls]`, `[[operators]]`, `[zones.<zone>]`, `[plans.<name>]`);
//! - `[plans]` is open (its other keys are plan names), so each of its documented keys is given a
//!   value of the wrong type instead, which a known key refuses as its own type error.
//!
//! The reference's rows are `| \`key\` | default | description |`, the default being one TOML
//! value in backticks or `unset` (absent from the code's defaults).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde_json::Value;
use tidegate::config::Settings;

const REFERENCE: &str = "docs/src/reference/configuration.md";
/// A key no table has; its unknown-field error lists the keys the table does have.
const PROBE: &str = "__probe__";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A documented default: a TOML value, or absent.
#[derive(Clone, Debug)]
enum Documented {
    Value(Value),
    /// Absent from the defaults; `Some` when the code then acts as if it were this value
    /// (`unset, acts as \`"10m"\``), which config/tidegate.toml may show.
    Unset(Option<Value>),
}

/// Parses one TOML value (as written after `key = `) into JSON.
fn toml_value(text: &str) -> Result<Value, String> {
    let doc: Value = Figment::from(Toml::string(&format!("v = {text}")))
        .extract()
        .map_err(|e| format!("{text} is not a TOML value: {e}"))?;
    Ok(doc["v"].clone())
}

/// The reference's rows: key to default, in order.
fn documented() -> Vec<(String, Documented)> {
    let text = std::fs::read_to_string(root().join(REFERENCE)).expect("the reference exists");
    let mut rows = Vec::new();
    let mut seen = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix("| `") else { continue };
        let cells: Vec<&str> = rest.splitn(3, " | ").collect();
        assert_eq!(
            cells.len(),
            3,
            "{REFERENCE}:{}: a key row has key, default, description",
            n + 1
        );
        let key = cells[0].strip_suffix('`').unwrap_or_else(|| {
            panic!("{REFERENCE}:{}: the key cell is one `key`", n + 1);
        });
        let cell = cells[1].trim();
        let default = if cell == "unset" {
            Documented::Unset(None)
        } else if let Some(acts) =
            cell.strip_prefix("unset, acts as `").and_then(|c| c.strip_suffix('`'))
        {
            Documented::Unset(Some(
                toml_value(acts).unwrap_or_else(|e| panic!("{REFERENCE}:{}: {e}", n + 1)),
            ))
        } else {
            let literal = cell
                .strip_prefix('`')
                .and_then(|c| c.strip_suffix('`'))
                .unwrap_or_else(|| {
                    panic!(
                        "{REFERENCE}:{}: the default of `{key}` is `unset`, `unset, acts as VALUE` or one TOML value in backticks, not {cell:?}",
                        n + 1
                    )
                });
            Documented::Value(
                toml_value(literal).unwrap_or_else(|e| panic!("{REFERENCE}:{}: {e}", n + 1)),
            )
        };
        assert!(seen.insert(key.to_owned()), "{REFERENCE}: `{key}` is listed twice");
        rows.push((key.to_owned(), default));
    }
    assert!(
        rows.len() > 50,
        "{REFERENCE}: only {} key rows found; is the table format intact?",
        rows.len()
    );
    rows
}

/// Every leaf of a JSON tree, by dotted path; objects are descended into, and empty objects
/// (maps such as `zones`) are leaves too.
fn leaves(value: &Value, prefix: &str, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                leaves(v, &path, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        _ => a == b,
    }
}

/// The documented keys that sit under `path` (a key itself, a `[]` array or a `<name>` map).
fn documents_under(docs: &[(String, Documented)], path: &str) -> bool {
    docs.iter().any(|(k, _)| {
        k.strip_prefix(path).is_some_and(|rest| rest.starts_with('.') || rest.starts_with("[]."))
    })
}

#[test]
fn every_key_with_a_default_in_the_code_is_documented_with_that_default() {
    let docs = documented();
    let by_key: BTreeMap<&str, &Documented> = docs.iter().map(|(k, d)| (k.as_str(), d)).collect();
    let mut code = BTreeMap::new();
    leaves(&serde_json::to_value(Settings::default()).unwrap(), "", &mut code);
    assert!(code.len() > 50, "Settings::default() has only {} keys?", code.len());
    let mut problems = Vec::new();
    for (key, value) in &code {
        match by_key.get(key.as_str()) {
            Some(Documented::Value(doc)) if same(doc, value) => {}
            Some(Documented::Value(doc)) => problems
                .push(format!("`{key}`: the reference says {doc}, the code's default is {value}")),
            Some(Documented::Unset(_)) if value.is_null() => {}
            Some(Documented::Unset(_)) => problems
                .push(format!("`{key}`: the reference says unset, the code's default is {value}")),
            // An absent table (`server.tls` is null), a map (`zones` is {}) or a list of tables
            // (`operators` is []) is documented by the keys under it.
            None if (value.is_null()
                || value.as_object().is_some_and(|m| m.is_empty())
                || value.as_array().is_some_and(|a| a.is_empty()))
                && documents_under(&docs, key) => {}
            None => problems.push(format!("`{key}` (default {value}) is missing from {REFERENCE}")),
        }
    }
    // A documented literal default must be a default the code has: a key listed with a value
    // but unknown to the defaults is either misspelt or not a key at all. Inside a list of
    // tables (`operators[].role`) the default is the one an entry without the key gets.
    for (key, default) in &docs {
        let Documented::Value(doc) = default else { continue };
        if let Some((list, leaf)) = key.split_once("[].") {
            let got = entry_default(&docs, list, leaf);
            if !same(doc, &got) {
                problems.push(format!(
                    "`{key}`: the reference says {doc}, an entry without it gets {got}"
                ));
            }
            continue;
        }
        if !code.contains_key(key) {
            problems.push(format!(
                "`{key}` is documented with the default {doc}, but the code's defaults have no such key"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the reference and Settings::default() disagree:\n{}",
        problems.join("\n")
    );
}

/// What `list[].leaf` is in an entry that gives only the list's keys documented as unset
/// (as strings): the default the code fills in.
fn entry_default(docs: &[(String, Documented)], list: &str, leaf: &str) -> Value {
    let prefix = format!("{list}[].");
    let mut entry = format!("[[{list}]]\n");
    for (key, default) in docs {
        if let (Some(sibling), Documented::Unset(None)) = (key.strip_prefix(&prefix), default) {
            entry.push_str(&format!("{sibling} = 'x'\n"));
        }
    }
    let settings: Settings = Figment::from(Serialized::defaults(Settings::default()))
        .merge(Toml::string(&entry))
        .extract()
        .unwrap_or_else(|e| panic!("a minimal `[[{list}]]` entry does not load: {e}\n{entry}"));
    let value = serde_json::to_value(settings).unwrap();
    value[list][0]
        .get(leaf)
        .cloned()
        .unwrap_or_else(|| panic!("`{list}[]` entries have no `{leaf}`"))
}

/// Runs `tidegate serve` on `toml` and returns its stderr; it must refuse to start.
fn refusal(toml: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probe.toml");
    std::fs::write(&path, toml).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--address", "127.0.0.1", "--port", "0", "--config"])
        .arg(&path)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .expect("the tidegate binary runs");
    assert!(
        !output.status.success(),
        "tidegate serve started on a config it should refuse:\n{toml}"
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The TOML that puts `key = value` in the table at `table` (a documented path: `a.b`,
/// `operators[]`, `zones.<zone>`), with placeholders made concrete.
fn toml_in(table: &str, key: &str, value: &str) -> String {
    let concrete: Vec<String> = table
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "<zone>" => "az-a".to_owned(), // a configured zone, so only the key is judged
            s if s.starts_with('<') => "probe".to_owned(),
            s => s.to_owned(),
        })
        .collect();
    match concrete.last() {
        None => format!("{key} = {value}\n"),
        Some(last) if last.ends_with("[]") => {
            let mut path = concrete.clone();
            *path.last_mut().unwrap() = last.trim_end_matches("[]").to_owned();
            format!("[[{}]]\n{key} = {value}\n", path.join("."))
        }
        Some(_) => format!("[{}]\n{key} = {value}\n", concrete.join(".")),
    }
}

/// The keys the binary says the table at `table` accepts, from its unknown-field error.
fn accepted_keys(table: &str) -> BTreeSet<String> {
    let stderr = refusal(&toml_in(table, PROBE, "0"));
    let line = stderr
        .lines()
        .find(|l| l.contains("unknown field") && l.contains(PROBE))
        .unwrap_or_else(|| {
            panic!(
                "the table `{table}` did not refuse the unknown key {PROBE} as unknown:\n{stderr}"
            )
        });
    let expected = line
        .split_once("expected")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no list of keys in: {line}"));
    // figment ends with ` for key "..." in ... TOML file`; the key names are the backticked words.
    let expected = expected.split(" for key ").next().unwrap();
    if expected.contains("there are no fields") {
        return BTreeSet::new();
    }
    let mut keys = BTreeSet::new();
    let mut rest = expected;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        let word: String =
            after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !word.is_empty() && after[word.len()..].starts_with('`') {
            rest = &after[word.len() + 1..];
            keys.insert(word);
        } else {
            rest = after;
        }
    }
    assert!(!keys.is_empty(), "no key names in the refusal: {line}");
    keys
}

/// The direct children documented under `table`: `server` -> {address, port, tls, ...}.
fn documented_children(docs: &[(String, Documented)], table: &str) -> BTreeSet<String> {
    let prefix = if table.is_empty() { String::new() } else { format!("{table}.") };
    docs.iter()
        .filter_map(|(k, _)| k.strip_prefix(&prefix))
        .map(|rest| {
            let head = rest.split('.').next().unwrap();
            head.trim_end_matches("[]").to_owned()
        })
        .filter(|head| !head.starts_with('<'))
        .collect()
}

/// Every table the reference documents keys in, as documented paths, the top level as "".
fn documented_tables(docs: &[(String, Documented)]) -> BTreeSet<String> {
    let mut tables = BTreeSet::from([String::new()]);
    for (key, _) in docs {
        let parts: Vec<&str> = key.split('.').collect();
        for end in 1..parts.len() {
            tables.insert(parts[..end].join("."));
        }
    }
    tables
}

/// A table whose other keys are names of entries (`[plans]`: triggers and also `[plans.<name>]`),
/// so an unknown key is not refused as unknown.
fn is_open(docs: &[(String, Documented)], table: &str) -> bool {
    let prefix = format!("{table}.<");
    docs.iter().any(|(k, _)| k.starts_with(&prefix))
        && docs.iter().any(|(k, _)| {
            k.strip_prefix(&format!("{table}.")).is_some_and(|rest| !rest.starts_with('<'))
        })
}

/// A map of entries only (`zones`: every key is a zone name), probed through `<zone>`.
fn is_map(docs: &[(String, Documented)], table: &str) -> bool {
    let prefix = format!("{table}.");
    let mut under = docs.iter().filter_map(|(k, _)| k.strip_prefix(&prefix)).peekable();
    under.peek().is_some() && under.all(|rest| rest.starts_with('<'))
}

#[test]
fn every_table_accepts_exactly_the_documented_keys() {
    let docs = documented();
    let mut code_tables = BTreeSet::new();
    let mut code = BTreeMap::new();
    leaves(&serde_json::to_value(Settings::default()).unwrap(), "", &mut code);
    for key in code.keys() {
        let parts: Vec<&str> = key.split('.').collect();
        for end in 1..parts.len() {
            code_tables.insert(parts[..end].join("."));
        }
    }
    let mut tables = documented_tables(&docs);
    tables.extend(code_tables);
    let mut problems = Vec::new();
    let mut probed = 0;
    for table in &tables {
        if is_map(&docs, table) {
            continue; // its entries are probed as `table.<name>`
        }
        let documented = documented_children(&docs, table);
        if is_open(&docs, table) {
            // Each documented key is given a table where it wants a value (or the reverse): a
            // known key refuses that as its own type, an unknown one would be read as an entry.
            for key in &documented {
                let path = format!("{table}.{key}");
                let stderr = refusal(&toml_in(table, key, &format!("{{ {PROBE} = 0 }}")));
                if !(stderr.contains("invalid type") && stderr.contains(&format!("\"{path}\""))) {
                    problems.push(format!(
                        "`{path}` is documented but the binary does not take it as a key of `[{table}]`: {}",
                        stderr.trim()
                    ));
                }
            }
            probed += 1;
            continue;
        }
        let accepted = accepted_keys(table);
        probed += 1;
        let name =
            if table.is_empty() { "the top level".to_owned() } else { format!("`[{table}]`") };
        for key in accepted.difference(&documented) {
            problems.push(format!("{name} accepts `{key}`, which {REFERENCE} does not list"));
        }
        for key in documented.difference(&accepted) {
            problems.push(format!(
                "{REFERENCE} lists `{key}` in {name}, which the binary does not accept (it accepts {accepted:?})"
            ));
        }
    }
    assert!(probed >= 20, "only {probed} tables probed");
    assert!(problems.is_empty(), "the reference and the binary disagree:\n{}", problems.join("\n"));
}

/// `key = value` lines for every documented key that has a literal default, grouped by table.
fn defaults_file(docs: &[(String, Documented)]) -> (String, usize) {
    let mut tables: BTreeMap<String, Vec<(String, Value)>> = BTreeMap::new();
    let mut count = 0;
    for (key, default) in docs {
        let Documented::Value(value) = default else { continue };
        let (table, leaf) = key.rsplit_once('.').unwrap_or(("", key.as_str()));
        if table.contains('<') || table.contains("[]") {
            continue; // inside an entry (`operators[].role`): checked by entry_default
        }
        tables.entry(table.to_owned()).or_default().push((leaf.to_owned(), value.clone()));
        count += 1;
    }
    let mut text = String::new();
    for (table, keys) in &tables {
        if !table.is_empty() {
            text.push_str(&format!("\n[{table}]\n"));
        }
        for (key, value) in keys {
            text.push_str(&format!("{key} = {}\n", toml_literal(value)));
        }
    }
    // The top-level keys must come before any table header.
    let top = tables.get("").map(|k| k.len()).unwrap_or(0);
    assert!(top > 0, "no top-level keys documented");
    (text, count)
}

fn toml_literal(value: &Value) -> String {
    match value {
        Value::String(s) => format!("'{s}'"),
        Value::Array(items) => {
            format!("[{}]", items.iter().map(toml_literal).collect::<Vec<_>>().join(", "))
        }
        other => other.to_string(),
    }
}

#[test]
fn the_binary_starts_on_every_documented_default_written_out() {
    let docs = documented();
    let (text, count) = defaults_file(&docs);
    assert!(count > 50, "only {count} keys with a default");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("defaults.toml");
    std::fs::write(&file, &text).unwrap();
    // --port 0 wins over the file's 8080, --data-dir over its "data": both keys are still read.
    let server = common::Server::start(&file, &dir.path().join("data"));
    let (status, ready) = common::get_json(&format!("{}/readyz", server.url));
    assert_eq!(status, 200, "not ready on the documented defaults: {ready}\n{}", server.stderr());
    let (status, routing) = common::get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(status, 200, "{routing}");
    assert_eq!(routing["units"], 100, "units.count: {routing}");
    assert_eq!(routing["blue_percent"].as_f64(), Some(50.0), "initial_blue_percent: {routing}");
    assert_eq!(routing["colors"]["blue"], "az-b", "colors.blue: {routing}");
}

#[test]
fn the_example_config_shows_the_documented_defaults() {
    let docs = documented();
    let by_key: BTreeMap<&str, &Documented> = docs.iter().map(|(k, d)| (k.as_str(), d)).collect();
    let path = root().join("config/tidegate.toml");
    let example: Value =
        Figment::from(Toml::file(&path)).extract().expect("config/tidegate.toml is TOML");
    let mut keys = BTreeMap::new();
    leaves(&example, "", &mut keys);
    assert!(keys.len() > 50, "config/tidegate.toml sets only {} keys", keys.len());
    let mut problems = Vec::new();
    for (key, value) in &keys {
        match by_key.get(key.as_str()) {
            Some(Documented::Value(doc)) if same(doc, value) => {}
            Some(Documented::Value(doc)) => {
                problems.push(format!("`{key}`: config/tidegate.toml has {value}, the reference {doc}"))
            }
            Some(Documented::Unset(Some(acts))) if same(acts, value) => {}
            Some(Documented::Unset(acts)) => problems.push(format!(
                "`{key}` is unset by default (acting as {acts:?}) but config/tidegate.toml sets it to {value}"
            )),
            None => problems.push(format!("config/tidegate.toml sets `{key}`, which {REFERENCE} does not list")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
