//! Client commands: small HTTP calls to a running tidegate, printed for humans or as JSON.

use std::time::Duration;

use serde_json::{Value, json};

use super::ClientArgs;
use crate::config::{Config, Overrides};

const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
    json: bool,
}

impl Client {
    fn new(args: &ClientArgs) -> Result<Client, String> {
        let base = match (&args.server, &args.config) {
            (Some(server), _) => server.trim_end_matches('/').to_owned(),
            (None, Some(file)) => {
                let config =
                    Config::load(Some(file), &Overrides::default()).map_err(|e| e.to_string())?;
                let host = if config.address.is_unspecified() {
                    "127.0.0.1".to_owned()
                } else if config.address.is_ipv6() {
                    format!("[{}]", config.address)
                } else {
                    config.address.to_string()
                };
                format!("http://{host}:{}", config.port)
            }
            (None, None) => DEFAULT_SERVER.to_owned(),
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Ok(Client { agent, base, token: args.token.clone(), json: args.json })
    }

    /// Sends a request and returns the JSON body, or the server's error as a sentence.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let result = match (method, body) {
            ("GET", _) => {
                let mut req = self.agent.get(&url);
                if let Some(auth) = &auth {
                    req = req.header("Authorization", auth);
                }
                req.call()
            }
            (method, body) => {
                let mut req = match method {
                    "PUT" => self.agent.put(&url),
                    "POST" => self.agent.post(&url),
                    _ => self.agent.delete(&url).force_send_body(),
                };
                if let Some(auth) = &auth {
                    req = req.header("Authorization", auth);
                }
                req.send_json(body.unwrap_or(Value::Null))
            }
        };
        let mut response =
            result.map_err(|e| format!("cannot reach tidegate at {}: {e}", self.base))?;
        let status = response.status().as_u16();
        let value: Value = response.body_mut().read_json().map_err(|e| {
            format!("{method} {path}: HTTP {status} with a body that is not JSON: {e}")
        })?;
        if status >= 400 {
            let code = value["error"].as_str().unwrap_or("error");
            let detail = value["detail"].as_str().unwrap_or("");
            return Err(format!("{method} {path}: HTTP {status} {code}: {detail}"));
        }
        Ok(value)
    }

    fn print(&self, value: &Value, summary: impl FnOnce(&Value) -> String) {
        if self.json {
            println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
        } else {
            println!("{}", summary(value));
        }
    }
}

fn encode(segment: &str) -> String {
    let mut out = String::new();
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn split_summary(table: &Value) -> String {
    format!(
        "version {}: blue {}% ({} of {} units) in {}, green {}% in {}; {} pinned user(s)",
        table["version"],
        table["blue_percent"],
        table["blue_units"],
        table["units"],
        table["colors"]["blue"].as_str().unwrap_or("?"),
        table["green_percent"],
        table["colors"]["green"].as_str().unwrap_or("?"),
        table["pins"].as_object().map_or(0, |p| p.len()),
    )
}

pub fn tag(args: &ClientArgs, user_id: &str) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.call("GET", &format!("/v1/tag?user_id={}", encode(user_id)), None)?;
    client.print(&value, |v| {
        format!(
            "{} -> {} (zone {}, unit {}{}, version {})",
            user_id,
            v["color"].as_str().unwrap_or("?"),
            v["zone"].as_str().unwrap_or("?"),
            v["unit"],
            if v["pinned"].as_bool() == Some(true) { ", pinned" } else { "" },
            v["version"],
        )
    });
    Ok(())
}

pub fn dial_get(args: &ClientArgs) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.call("GET", "/v1/routing", None)?;
    client.print(&value, split_summary);
    Ok(())
}

pub fn dial_set(
    args: &ClientArgs,
    percent: f64,
    reason: &str,
    expected_version: Option<u64>,
) -> Result<(), String> {
    let client = Client::new(args)?;
    let before = client.call("GET", "/v1/routing", None)?;
    let expected = match expected_version {
        Some(v) => v,
        None => before["version"].as_u64().ok_or("the server sent no version")?,
    };
    let body = json!({ "blue_percent": percent, "expected_version": expected, "reason": reason });
    let value = client.call("PUT", "/v1/dial", Some(body))?;
    client.print(&value, |after| {
        if after["changed"].as_bool() == Some(false) {
            format!("unchanged: {}", split_summary(after))
        } else {
            format!("was blue {}%; now {}", before["blue_percent"], split_summary(after))
        }
    });
    Ok(())
}

pub fn pin(
    args: &ClientArgs,
    user_id: &str,
    color: Option<&str>,
    reason: &str,
) -> Result<(), String> {
    let client = Client::new(args)?;
    let current = client.call("GET", "/v1/routing", None)?;
    let expected = current["version"].as_u64().ok_or("the server sent no version")?;
    let path = format!("/v1/pins/{}", encode(user_id));
    let value = match color {
        Some(color) => {
            let body = json!({ "color": color, "expected_version": expected, "reason": reason });
            client.call("PUT", &path, Some(body))?
        }
        None => {
            let body = json!({ "expected_version": expected, "reason": reason });
            client.call("DELETE", &path, Some(body))?
        }
    };
    client.print(&value, |v| match color {
        Some(color) => format!("{user_id} pinned {color} (version {})", v["version"]),
        None => format!("{user_id} unpinned (version {})", v["version"]),
    });
    Ok(())
}

pub fn status(args: &ClientArgs) -> Result<(), String> {
    let client = Client::new(args)?;
    let routing = client.call("GET", "/v1/routing", None)?;
    let ready = client.call("GET", "/readyz", None);
    let audit = client.call("GET", "/v1/audit?limit=5", None)?;
    let value = json!({
        "routing": routing,
        "ready": ready.as_ref().is_ok(),
        "ready_detail": ready.as_ref().map_or_else(|e| json!(e), |v| v.clone()),
        "recent_changes": audit["entries"],
    });
    client.print(&value, |v| {
        let mut out = format!("tidegate at {}\n  {}\n", client.base, split_summary(&v["routing"]));
        match &ready {
            Ok(r) => out.push_str(&format!("  ready: log {}\n", r["log"].as_str().unwrap_or("?"))),
            Err(e) => out.push_str(&format!("  NOT READY: {e}\n")),
        }
        out.push_str("  recent changes:\n");
        for entry in v["recent_changes"].as_array().into_iter().flatten() {
            out.push_str(&format!("    {}\n", audit_line(entry)));
        }
        out.trim_end().to_owned()
    });
    Ok(())
}

fn audit_line(e: &Value) -> String {
    format!(
        "v{} {} {} {}: {} -> {} ({})",
        e["version"],
        e["at"].as_str().unwrap_or("?"),
        e["by"].as_str().unwrap_or("?"),
        e["action"].as_str().unwrap_or("?"),
        e["from"].as_str().unwrap_or(""),
        e["to"].as_str().unwrap_or(""),
        e["reason"].as_str().unwrap_or(""),
    )
}

pub fn audit(args: &ClientArgs, limit: usize) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.call("GET", &format!("/v1/audit?limit={limit}"), None)?;
    client.print(&value, |v| {
        v["entries"].as_array().into_iter().flatten().map(audit_line).collect::<Vec<_>>().join("\n")
    });
    Ok(())
}
