//! Shared by the observability tests: every PromQL expression in the dashboards and rules.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use promql_parser::parser::{self, Expr};
use serde_json::Value;

pub const ZONES: [&str; 2] = ["az-a", "az-b"];

/// Where an expression comes from, for messages.
#[derive(Debug, Clone)]
pub struct Source {
    pub file: String,
    pub what: String,
    pub expr: String,
    /// Recording/alerting rule expressions are written without Grafana variables.
    pub is_rule: bool,
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn dashboard_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

pub fn rule_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("dashboards/rules"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .collect();
    files.sort();
    files
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

pub fn read_rules(path: &Path) -> Value {
    let yaml: serde_norway::Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
    serde_json::to_value(yaml).unwrap()
}

/// All panels, including those nested in collapsed rows.
pub fn panels(dashboard: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        out.push(panel.clone());
        for nested in panel["panels"].as_array().into_iter().flatten() {
            out.push(nested.clone());
        }
    }
    out
}

/// Every expression: panel targets, annotation queries, recording and alerting rules.
pub fn all_expressions() -> Vec<Source> {
    let mut out = Vec::new();
    for path in dashboard_files() {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let d = read_json(&path);
        for panel in panels(&d) {
            for target in panel["targets"].as_array().into_iter().flatten() {
                out.push(Source {
                    file: file.clone(),
                    what: format!("panel {:?} target {}", panel["title"], target["refId"]),
                    expr: target["expr"].as_str().unwrap().to_owned(),
                    is_rule: false,
                });
            }
        }
        for a in d["annotations"]["list"].as_array().into_iter().flatten() {
            if let Some(expr) = a["expr"].as_str() {
                out.push(Source {
                    file: file.clone(),
                    what: format!("annotation {:?}", a["name"]),
                    expr: expr.to_owned(),
                    is_rule: false,
                });
            }
        }
    }
    for path in rule_files() {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let rules = read_rules(&path);
        for group in rules["groups"].as_array().unwrap() {
            for rule in group["rules"].as_array().unwrap() {
                let name = rule["record"].as_str().or(rule["alert"].as_str()).unwrap();
                out.push(Source {
                    file: file.clone(),
                    what: format!("rule {name}"),
                    expr: rule["expr"].as_str().unwrap().to_owned(),
                    is_rule: true,
                });
            }
        }
    }
    out
}

/// Names recorded by the rule files.
pub fn recorded_names() -> Vec<String> {
    rule_files()
        .iter()
        .flat_map(|p| {
            let rules = read_rules(p);
            rules["groups"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|g| g["rules"].as_array().unwrap().clone())
                .filter_map(|r| r["record"].as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Replaces Grafana variables with values Prometheus accepts.
pub fn substitute(expr: &str, rate_interval: &str) -> String {
    expr.replace("$__rate_interval", rate_interval)
        .replace("$group", ".+")
        .replace("${zone}", &ZONES.join("|"))
        .replace("$zone", &ZONES.join("|"))
}

pub fn parse(expr: &str) -> Result<Expr, String> {
    parser::parse(expr)
}

/// Metric names an expression selects.
pub fn metric_names(expr: &Expr, out: &mut Vec<String>) {
    match expr {
        Expr::Aggregate(a) => {
            metric_names(&a.expr, out);
            if let Some(p) = &a.param {
                metric_names(p, out);
            }
        }
        Expr::Unary(u) => metric_names(&u.expr, out),
        Expr::Binary(b) => {
            metric_names(&b.lhs, out);
            metric_names(&b.rhs, out);
        }
        Expr::Paren(p) => metric_names(&p.expr, out),
        Expr::Subquery(s) => metric_names(&s.expr, out),
        Expr::VectorSelector(vs) => out.extend(vs.name.clone()),
        Expr::MatrixSelector(ms) => out.extend(ms.vs.name.clone()),
        Expr::Call(c) => c.args.args.iter().for_each(|a| metric_names(a, out)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// The signal behind a threshold: `x > 0.05` -> `x`, `a > 1 and b > 2` -> `a`, `absent(x)` -> `x`.
/// Alerts and annotations are empty when nothing is wrong; their signal never is.
pub fn signal(expr: &Expr) -> Expr {
    match expr {
        Expr::Binary(b)
            if (b.op.is_comparison_operator()
                && !b.modifier.as_ref().is_some_and(|m| m.return_bool))
                || b.op.is_set_operator() =>
        {
            signal(&b.lhs)
        }
        Expr::Paren(p) => signal(&p.expr),
        Expr::Call(c) if c.func.name == "absent" => signal(&c.args.args[0]),
        other => other.clone(),
    }
}

/// Whether every configured zone must appear in the result: expressions filtered by the zone
/// variable, and the zone-level recording rules. (Breaches, say, exist only for drained zones.)
pub fn expects_every_zone(expr: &str) -> bool {
    expr.contains("zone=~\"$zone\"")
        || expr.starts_with("zone:")
        || expr.contains("by (zone) (rate(tidegate_zone_")
}
