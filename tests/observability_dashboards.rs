//! Structural checks of the Grafana dashboards and Prometheus rules (no server needed).

mod observability_support;

use std::collections::{BTreeSet, HashSet};

use observability_support::*;
use tidegate::telemetry::METRICS;

/// Metric names tidegate exports, with the series a histogram adds.
fn exported() -> HashSet<String> {
    let mut names = HashSet::new();
    for (kind, name, _) in METRICS {
        names.insert((*name).to_owned());
        if *kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        }
    }
    names
}

#[test]
fn every_dashboard_is_well_formed() {
    let files = dashboard_files();
    assert!(files.len() >= 2, "dashboards are missing");
    for path in files {
        let d = read_json(&path);
        let name = path.display().to_string();
        assert!(d["schemaVersion"].as_u64().unwrap() >= 36, "{name}: current schema");
        assert!(d["uid"].as_str().is_some_and(|u| !u.is_empty() && u.len() <= 40), "{name}: uid");
        let vars: Vec<&str> = d["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert!(vars.contains(&"datasource"), "{name}: a datasource variable");
        let mut ids = HashSet::new();
        for panel in panels(&d) {
            let title = panel["title"].as_str().unwrap_or_default();
            assert!(
                ids.insert(panel["id"].as_u64().unwrap()),
                "{name}: duplicate panel id {}",
                panel["id"]
            );
            assert!(!title.is_empty(), "{name}: a panel without a title");
            if panel["type"] == "row" {
                continue;
            }
            assert!(
                panel["description"].as_str().is_some_and(|s| s.len() > 20),
                "{name}: {title} needs a description"
            );
            assert!(
                panel["fieldConfig"]["defaults"]["unit"].is_string(),
                "{name}: {title} needs a unit"
            );
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "{name}: {title} must use the datasource variable"
            );
            let targets = panel["targets"].as_array().unwrap();
            assert!(!targets.is_empty(), "{name}: {title} has no query");
            for t in targets {
                let expr = t["expr"].as_str().unwrap();
                assert!(
                    !expr.contains("[1m]") && !expr.contains("[5m]")
                        || expr.contains(":rate1m")
                        || expr.contains("[1h]"),
                    "{name}: {title} should use $__rate_interval, not a fixed range: {expr}"
                );
                if expr.contains("tidegate_zone_") && !expr.contains("guard_breaches") {
                    assert!(
                        expr.contains("$zone"),
                        "{name}: {title} must filter by the zone variable: {expr}"
                    );
                }
            }
        }
        // Every $variable used is defined (Grafana's own $__ variables aside).
        let text = std::fs::read_to_string(&path).unwrap();
        for used in text.split('$').skip(1) {
            let var: String = used
                .trim_start_matches('{')
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if var.is_empty() || var.starts_with("__") {
                continue;
            }
            assert!(vars.contains(&var.as_str()), "{name}: ${var} is used but not defined");
        }
        let zone = d["templating"]["list"].as_array().unwrap().iter().find(|v| v["name"] == "zone");
        if let Some(zone) = zone {
            assert_eq!(zone["multi"], true, "{name}: the zone variable is multi-select");
        }
    }
}

#[test]
fn every_expression_parses_and_uses_only_exported_metrics() {
    let exported = exported();
    let recorded: HashSet<String> = recorded_names().into_iter().collect();
    let sources = all_expressions();
    assert!(
        sources.len() >= 30,
        "expected the dashboards' and rules' expressions, got {}",
        sources.len()
    );
    let mut used = BTreeSet::new();
    for s in &sources {
        let expr = substitute(&s.expr, "1m");
        let parsed = parse(&expr)
            .unwrap_or_else(|e| panic!("{} {}: `{expr}` does not parse: {e}", s.file, s.what));
        let mut names = Vec::new();
        metric_names(&parsed, &mut names);
        assert!(!names.is_empty(), "{} {}: selects no metric", s.file, s.what);
        for n in names {
            let known = exported.contains(&n) || recorded.contains(&n) || n == "up";
            assert!(
                known,
                "{} {}: `{n}` is neither exported by tidegate nor recorded by a rule",
                s.file, s.what
            );
            used.insert(n);
        }
    }
    for name in &recorded {
        assert!(
            name.split(':').count() == 3,
            "recording rule `{name}` must be level:metric:operations"
        );
    }
    // Every recording rule is used by a dashboard or an alert, or it is dead weight.
    for name in recorded {
        let users = sources.iter().filter(|s| s.expr.contains(&name)).count();
        assert!(users >= 1, "recording rule {name} is unused");
    }
}

#[test]
fn ratios_are_sums_divided_never_averaged() {
    for s in all_expressions() {
        assert!(
            !s.expr.contains("avg(") && !s.expr.contains("avg by"),
            "{} {}: averages a ratio: {}",
            s.file,
            s.what,
            s.expr
        );
    }
}
