//! Client commands: small HTTP calls to a running tidegate, printed for humans or as JSON.

use std::time::Duration;

use serde_json::{Value, json};

use super::args::{ClientArgs, DrainStartArgs, FollowArgs};
use crate::config::{Config, Overrides};

const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

struct Client {
    agent: ureq::Agent,
    /// Coordinator base URLs, tried in turn when one cannot be reached (`--server a,b,c`).
    bases: Vec<String>,
    /// The base that answered last (tried first next time).
    current: std::cell::Cell<usize>,
    token: Option<String>,
    json: bool,
}

/// How long a read may take before the next coordinator is tried (a hung or stopped one still
/// accepts connections, so only a timeout tells). Changes wait up to 30 s.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// True when `e` means the request certainly never reached a server (so a change may be sent to
/// the next coordinator).
fn undelivered(e: &ureq::Error) -> bool {
    use std::io::ErrorKind;
    match e {
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => true,
        ureq::Error::Timeout(t) => {
            matches!(t, ureq::Timeout::Resolve | ureq::Timeout::Connect)
        }
        ureq::Error::Io(io) => matches!(
            io.kind(),
            ErrorKind::ConnectionRefused | ErrorKind::AddrNotAvailable | ErrorKind::NotConnected
        ),
        _ => false,
    }
}

/// The base URLs in `--server` / `TIDEGATE_URL`: comma-separated, each without a trailing `/`.
fn split_servers(servers: &str) -> Result<Vec<String>, String> {
    let bases: Vec<String> = servers
        .split(',')
        .map(|s| s.trim().trim_end_matches('/').to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    if bases.is_empty() {
        return Err("--server: no URL given".into());
    }
    for base in &bases {
        if !base.starts_with("http://") && !base.starts_with("https://") {
            return Err(format!("--server: `{base}` is not an http(s) URL"));
        }
    }
    Ok(bases)
}

impl Client {
    fn new(args: &ClientArgs) -> Result<Client, String> {
        let config = match &args.config {
            Some(file) => {
                Some(Config::load(Some(file), &Overrides::default()).map_err(|e| e.to_string())?)
            }
            None => None,
        };
        let bases = match (&args.server, &config) {
            (Some(server), _) => split_servers(server)?,
            (None, Some(config)) => {
                let host = if config.address.is_unspecified() {
                    "127.0.0.1".to_owned()
                } else if config.address.is_ipv6() {
                    format!("[{}]", config.address)
                } else {
                    config.address.to_string()
                };
                let scheme = if config.tls.is_some() { "https" } else { "http" };
                vec![format!("{scheme}://{host}:{}", config.port)]
            }
            (None, None) => vec![DEFAULT_SERVER.to_owned()],
        };
        // The agent verifies https:// servers; one agent serves every base.
        let base = bases.iter().find(|b| crate::client::tls::is_https(b)).unwrap_or(&bases[0]);
        // --ca-file (or TIDEGATE_CA_FILE) wins over `[client] ca_file`; without either, an
        // https:// server is verified against the system's roots.
        let ca_file = args.ca_file.clone().or_else(|| config.and_then(|c| c.client_ca_file));
        let agent = crate::client::tls::agent(base, Duration::from_secs(30), ca_file.as_deref())
            .map_err(|e| e.to_string())?;
        let current = std::cell::Cell::new(0);
        Ok(Client { agent, bases, current, token: args.token.clone(), json: args.json })
    }

    /// The base URL that answered last.
    fn base(&self) -> &str {
        &self.bases[self.current.get()]
    }

    /// A change: `body` with the routing version just read as its `expected_version` and
    /// `reason`, sent as `method path` (every audited change carries both).
    fn change(
        &self,
        method: &str,
        path: &str,
        mut body: Value,
        reason: &str,
    ) -> Result<Value, String> {
        let current = self.call("GET", "/v1/routing", None)?;
        let expected = current["version"].as_u64().ok_or("the server sent no version")?;
        body["expected_version"] = json!(expected);
        body["reason"] = json!(reason);
        self.call(method, path, Some(body))
    }

    /// Sends a request and returns the JSON body, or the server's error as a sentence. A
    /// coordinator that cannot be reached (refused, reset, timed out) is skipped for the next
    /// one, as the `Router` does; an HTTP answer, even 4xx or 5xx, is the answer.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let mut failures = Vec::new();
        let start = self.current.get();
        for step in 0..self.bases.len() {
            let index = (start + step) % self.bases.len();
            match self.send(&self.bases[index], method, path, body.clone()) {
                Ok(response) => {
                    self.current.set(index);
                    return self.answer(method, path, response);
                }
                // A change that may have reached the server is not sent to another one: its
                // outcome is unknown, and only the audit log can tell.
                Err(e) if method != "GET" && !undelivered(&e) => {
                    return Err(format!(
                        "{method} {path}: {} did not answer ({e}); the change may or may not have been made: check `tidegate audit` before trying again",
                        self.bases[index]
                    ));
                }
                Err(e) => failures.push(format!("{}: {e}", self.bases[index])),
            }
        }
        Err(format!("cannot reach tidegate ({})", failures.join("; ")))
    }

    fn send(
        &self,
        base: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let url = format!("{base}{path}");
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        match (method, body) {
            ("GET", _) => {
                let mut req =
                    self.agent.get(&url).config().timeout_global(Some(READ_TIMEOUT)).build();
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
        }
    }

    fn answer(
        &self,
        method: &str,
        path: &str,
        mut response: ureq::http::Response<ureq::Body>,
    ) -> Result<Value, String> {
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

/// A JSON number as people write it: `40`, not `40.0`; `12.5` stays.
fn num(value: &Value) -> String {
    match value.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        Some(f) => format!("{f}"),
        None => "-".to_owned(),
    }
}

/// A share of the units in percent as people write it: `40`, `33.33`.
fn share(units: u64, total: u64) -> String {
    if total == 0 {
        return "-".to_owned();
    }
    num(&json!((units as f64 * 10_000.0 / total as f64).round() / 100.0))
}

/// One zone of a map: its name, lane and how many units it owns.
struct ZoneUnits {
    name: String,
    lane: String,
    units: u64,
}

/// The units of a unit set (`0-24`, `6,9,18`, `25-49,60`); 0 for what does not parse.
fn unit_count(set: &str) -> u64 {
    set.split(',')
        .filter(|part| !part.trim().is_empty())
        .map(|part| match part.trim().split_once('-') {
            Some((a, b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => u64::from(part.trim().parse::<u64>().is_ok()),
        })
        .sum()
}

/// Every zone of the table that is not retired (or still owns units), in the table's order,
/// with its units in the default domain's map or, given `unit_map`, in that map. `None` for a
/// server that sends no `zones`.
fn zone_units(table: &Value, unit_map: Option<&Value>) -> Option<Vec<ZoneUnits>> {
    let zones = table["zones"].as_array()?;
    let owned = |name: &str| -> u64 {
        unit_map
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|run| run["zone"].as_str() == Some(name))
            .map(|run| unit_count(run["units"].as_str().unwrap_or("")))
            .sum()
    };
    Some(
        zones
            .iter()
            .map(|z| {
                let name = z["name"].as_str().unwrap_or("?").to_owned();
                let units = match unit_map {
                    Some(_) => owned(&name),
                    None => z["units"].as_u64().unwrap_or(0),
                };
                let lane = z["lane"].as_str().unwrap_or("?").to_owned();
                (ZoneUnits { name, lane, units }, z["retired"] == true)
            })
            .filter(|(z, retired)| !retired || z.units > 0)
            .map(|(z, _)| z)
            .collect(),
    )
}

/// A map in words: on two zones the dial (`blue 30% (30 of 100 units) in az-b, green 70% in
/// az-a`), on more every zone with its lane, share and units (`az-b blue 25% (25 units), az-a
/// green 50% (50 units), az-c red 25% (25 units)`).
fn map_words(zones: &[ZoneUnits], total: u64) -> String {
    if let [a, b] = zones
        && let Some((blue, green)) = match (a.lane.as_str(), b.lane.as_str()) {
            ("blue", "green") => Some((a, b)),
            ("green", "blue") => Some((b, a)),
            _ => None,
        }
    {
        return format!(
            "blue {}% ({} of {total} units) in {}, green {}% in {}",
            share(blue.units, total),
            blue.units,
            blue.name,
            share(green.units, total),
            green.name,
        );
    }
    let parts: Vec<String> = zones
        .iter()
        .map(|z| format!("{} {} {}% ({} units)", z.name, z.lane, share(z.units, total), z.units))
        .collect();
    parts.join(", ")
}

/// The table in words: version, every zone's lane, share and units, pins, and one more line per
/// routing domain (`domain search: ...`).
fn split_summary(table: &Value) -> String {
    let pins = table["pins"].as_object().map_or(0, |p| p.len());
    let total = table["units"].as_u64().unwrap_or(0);
    let Some(zones) = zone_units(table, None) else {
        // A server that sends no zones: its two-zone dial.
        return format!(
            "version {}: blue {}% ({} of {} units) in {}, green {}% in {}; {pins} pinned user(s)",
            table["version"],
            num(&table["blue_percent"]),
            table["blue_units"],
            table["units"],
            table["colors"]["blue"].as_str().unwrap_or("?"),
            num(&table["green_percent"]),
            table["colors"]["green"].as_str().unwrap_or("?"),
        );
    };
    let mut out = format!("version {}: {}", table["version"], map_words(&zones, total));
    if zones.len() > 2 {
        out.push_str(&format!("; {total} units"));
    }
    out.push_str(&format!("; {pins} pinned user(s)"));
    for (name, domain) in table["domains"].as_object().into_iter().flatten() {
        if let Some(zones) = zone_units(table, Some(&domain["unit_map"])) {
            out.push_str(&format!("\n  domain {name}: {}", map_words(&zones, total)));
        }
    }
    out
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

/// `tidegate dial set`: where to, at which version, how; `extra` adds fields (the freeze).
pub struct DialAsk<'a> {
    pub percent: f64,
    pub expected_version: Option<u64>,
    pub force: bool,
    pub domain: Option<&'a str>,
    pub extra: Value,
}

pub fn dial_set(args: &ClientArgs, ask: DialAsk<'_>, reason: &str) -> Result<(), String> {
    let DialAsk { percent, expected_version, force, domain, extra } = ask;
    let client = Client::new(args)?;
    let before = client.call("GET", "/v1/routing", None)?;
    let expected = match expected_version {
        Some(v) => v,
        None => before["version"].as_u64().ok_or("the server sent no version")?,
    };
    let mut body =
        json!({ "blue_percent": percent, "expected_version": expected, "reason": reason });
    if force {
        body["force"] = json!(true);
    }
    for (k, v) in extra.as_object().into_iter().flatten() {
        body[k] = v.clone();
    }
    let named = domain.filter(|d| *d != "default");
    if let Some(name) = named {
        body["domain"] = json!(name);
    }
    let value = client.call("PUT", "/v1/dial", Some(body.clone()))?;
    // A loss-less move (asked for, or the server's `[freeze] by_default`): wait for its end.
    if value["change"].is_object() {
        return units_change_wait(&client, &value);
    }
    if body["freeze"] == true {
        client.print(&value, |after| format!("unchanged: {}", split_summary(after)));
        return Ok(());
    }
    if let Some(name) = named {
        let percent = |t: &Value| num(&t["domains"][name]["blue_percent"]);
        client.print(&value, |after| {
            if after["changed"].as_bool() == Some(false) {
                format!("unchanged: domain {name} at blue {}%", percent(after))
            } else {
                format!(
                    "domain {name}: was blue {}%; now blue {}%",
                    percent(&before),
                    percent(after)
                )
            }
        });
        return Ok(());
    }
    client.print(&value, |after| {
        if after["changed"].as_bool() == Some(false) {
            format!("unchanged: {}", split_summary(after))
        } else {
            format!(
                "was blue {}%; now {}{}",
                num(&before["blue_percent"]),
                split_summary(after),
                freeze_note(after)
            )
        }
    });
    Ok(())
}

/// How a move frozen by the server's `[freeze] by_default` went, from its answer (empty for a
/// move that was not frozen).
fn freeze_note(answer: &Value) -> String {
    let f = &answer["loss_less"];
    if !f.is_object() {
        return String::new();
    }
    format!(
        "\nloss-less (frozen by default): versions {}-{}, {}",
        f["frozen_version"],
        f["unfrozen_version"],
        f["said"].as_str().unwrap_or("unfrozen")
    )
}

/// `tidegate units move|evacuate`: the body with the version just read and the reason; prints
/// the moved units, each receiver's verdict and the new map (or the preview of a dry run).
pub fn units(
    args: &ClientArgs,
    method: &str,
    path: &str,
    body: Value,
    reason: &str,
) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.change(method, path, body, reason)?;
    if value["change"].is_object() {
        return units_change_wait(&client, &value);
    }
    client.print(&value, |v| {
        let runs: Vec<String> = v["unit_map"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                format!(
                    "{} {}",
                    r["units"].as_str().unwrap_or("?"),
                    r["zone"].as_str().unwrap_or("?")
                )
            })
            .collect();
        let verdicts: Vec<String> = v["projection"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                format!(
                    "{}: {}",
                    p["zone"].as_str().unwrap_or("?"),
                    p["verdict"].as_str().unwrap_or("?")
                )
            })
            .collect();
        let head = if v["dry_run"] == true {
            "dry run, nothing changed:".to_owned()
        } else {
            format!("version {}:", v["version"])
        };
        format!(
            "{head} {} unit(s) moved; capacity {}; map {}{}",
            v["moved_units"],
            if verdicts.is_empty() { "not checked".to_owned() } else { verdicts.join(", ") },
            runs.join(", "),
            freeze_note(v)
        )
    });
    Ok(())
}

/// One channel in a line: name, services, users, zone, state.
fn channel_line(c: &Value) -> String {
    let services: Vec<&str> =
        c["services"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let users = c["users"].as_array().map_or(0, Vec::len);
    let mut line = format!(
        "{} [{}] {}: {}% of users (units {}){} -> {}{}",
        c["name"].as_str().unwrap_or("?"),
        c["domain"].as_str().unwrap_or("default"),
        services.join(","),
        num(&c["share_percent"]),
        c["units"].as_str().unwrap_or(""),
        if users > 0 { format!(" + {users} listed user(s)") } else { String::new() },
        c["zone"].as_str().unwrap_or("?"),
        if c["suspended"] == true { " (suspended)" } else { "" },
    );
    if let Some(at) = c["expires_at_ms"].as_u64() {
        line.push_str(&format!(", expires at {at} ms"));
    }
    line
}

/// `tidegate channels list`.
pub fn channels_list(args: &ClientArgs) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.call("GET", "/v1/channels", None)?;
    client.print(&value, |v| {
        let mut lines: Vec<String> =
            v["channels"].as_array().into_iter().flatten().map(channel_line).collect();
        if v["change"].is_object() {
            lines.push(change_line(&v["change"]));
        }
        if lines.is_empty() { "no release channels".to_owned() } else { lines.join("\n") }
    });
    Ok(())
}

/// `tidegate channels put|delete NAME`: the body with the version just read and the reason.
pub fn channel_change(
    args: &ClientArgs,
    method: &str,
    name: &str,
    body: Value,
    reason: &str,
) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.change(method, &format!("/v1/channels/{name}"), body, reason)?;
    if value["change"].is_object() {
        return channel_change_wait(&client, name, &value);
    }
    // A put frozen by the server's `[freeze] by_default` answers with its `loss_less` summary
    // but not the channel: read it back.
    let mut value = value;
    if method == "PUT" && value["dry_run"] != true && !value["channel"].is_object() {
        let listed = client.call("GET", "/v1/channels", None)?;
        if let Some(c) =
            listed["channels"].as_array().into_iter().flatten().find(|c| c["name"] == name)
        {
            value["channel"] = c.clone();
        }
    }
    client.print(&value, |v| match (method, v["dry_run"] == true) {
        ("DELETE", _) => {
            format!("version {}: channel {name} deleted{}", v["version"], freeze_note(v))
        }
        (_, true) => {
            let mut line = format!("dry run, nothing changed: {}", channel_line(&v["channel"]));
            if let Some(f) = v["freeze"].as_object() {
                line.push_str(&format!(
                    "\nloss-less: would freeze the writes of {} for units {} and {} listed user(s)",
                    strings(&f["services"]).join(","),
                    f["units"].as_str().filter(|u| !u.is_empty()).unwrap_or("none"),
                    f["users"].as_array().map_or(0, Vec::len)
                ));
            }
            line
        }
        _ => format!("version {}: {}{}", v["version"], channel_line(&v["channel"]), freeze_note(v)),
    });
    Ok(())
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

/// A change in progress, in one line: what it freezes and its phase.
fn change_line(c: &Value) -> String {
    format!(
        "channel {} {} in progress ({}): writes of {} frozen for units {} and {} listed user(s) since version {}",
        c["channel"].as_str().unwrap_or("?"),
        c["action"].as_str().unwrap_or("change"),
        c["phase"].as_str().unwrap_or("?"),
        strings(&c["services"]).join(","),
        c["units"].as_str().filter(|u| !u.is_empty()).unwrap_or("none"),
        c["users"].as_array().map_or(0, Vec::len),
        c["frozen_version"]
    )
}

/// A loss-less unit (or dial) move: says what froze, waits for the move to end (the switch and
/// the unfreeze, or its undoing at the window) and says how it ended, from the audit.
fn units_change_wait(client: &Client, started: &Value) -> Result<(), String> {
    let change = &started["change"];
    if !client.json {
        let frozen: Vec<String> = change["frozen"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(domain, units)| format!("{} in {domain}", units.as_str().unwrap_or("?")))
            .collect();
        println!(
            "version {}: units {} frozen for a loss-less move; it moves once every live subscriber has the freeze",
            started["version"],
            frozen.join(", ")
        );
    }
    let window = change["window_ms"].as_u64().unwrap_or(30_000);
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(window + 30_000);
    while !client.call("GET", "/v1/changes", None)?["units"].is_null() {
        if std::time::Instant::now() > deadline {
            return Err("the unit move is still in progress; see GET /v1/changes".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let audit = client.call("GET", "/v1/audit?limit=20", None)?;
    let end = audit["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["action"] == "units_unfreeze")
        .cloned()
        .unwrap_or(Value::Null);
    client.print(&end, |e| {
        format!(
            "version {}: {} ({})",
            e["version"],
            e["to"].as_str().unwrap_or("the move ended"),
            e["reason"].as_str().unwrap_or("")
        )
    });
    if end["to"].as_str().is_some_and(|t| t.contains("without switching")) {
        return Err("no unit moved: the freeze was undone".into());
    }
    Ok(())
}

/// A loss-less put or delete: says what froze, waits for the change to end (the switch and the
/// unfreeze, or its undoing at the window) and says how it ended, from the audit.
fn channel_change_wait(client: &Client, name: &str, started: &Value) -> Result<(), String> {
    if !client.json {
        println!("version {}: {}", started["version"], change_line(&started["change"]));
    }
    let window = started["change"]["window_ms"].as_u64().unwrap_or(30_000);
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(window + 30_000);
    loop {
        let list = client.call("GET", "/v1/channels", None)?;
        if list["change"]["channel"].as_str() != Some(name) {
            break;
        }
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "channel {name}'s change is still in progress: {}",
                change_line(&list["change"])
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let audit = client.call("GET", "/v1/audit?limit=20", None)?;
    let ended = audit["entries"].as_array().into_iter().flatten().find(|e| {
        e["action"] == "channel_unfreeze" && e["to"].as_str().is_some_and(|t| t.contains(name))
    });
    let end = ended.cloned().unwrap_or(Value::Null);
    client.print(&end, |e| {
        format!(
            "version {}: {} ({})",
            e["version"],
            e["to"].as_str().unwrap_or("the change ended"),
            e["reason"].as_str().unwrap_or("")
        )
    });
    if end["to"].as_str().is_some_and(|t| t.contains("without switching")) {
        return Err(format!("channel {name} is unchanged: its freeze was undone"));
    }
    Ok(())
}

/// `tidegate automation [status|stop|start]`.
pub fn automation(args: &ClientArgs, change: Option<(bool, &str)>) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = match change {
        None => client.call("GET", "/v1/automation", None)?,
        Some((stopped, reason)) => {
            client.change("PUT", "/v1/automation", json!({"stopped": stopped}), reason)?
        }
    };
    client.print(&value, |a| {
        let mut lines = vec![if a["stopped"] == true {
            format!(
                "automation stopped by {}: {}",
                a["changed_by"].as_str().unwrap_or("?"),
                a["reason"].as_str().unwrap_or("")
            )
        } else {
            "automation on".to_owned()
        }];
        if a["triggers_enabled"] == false {
            lines.push("([plans] triggers = false on this coordinator: no trigger starts a run)".into());
        }
        lines.push(format!(
            "caps: one hop, once per incident, one automatic run per {}, at most {}% of users per run",
            a["window"].as_str().unwrap_or("?"),
            num(&a["max_share_percent"])
        ));
        let runs = a["runs_since_armed"].as_array().cloned().unwrap_or_default();
        if runs.is_empty() {
            lines.push("no automatic run since automation was armed".into());
        }
        for r in runs {
            lines.push(format!(
                "automatic run {} of {} at {}: left {} (no automatic move back into it)",
                r["run"],
                r["plan"].as_str().unwrap_or("?"),
                r["started_at"].as_str().unwrap_or("?"),
                r["left_zone"].as_str().unwrap_or("-")
            ));
        }
        lines.join("\n")
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
        Some(color) => {
            format!("{user_id} pinned {color} (version {}){}", v["version"], freeze_note(v))
        }
        None => format!("{user_id} unpinned (version {}){}", v["version"], freeze_note(v)),
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
        let mut out = format!(
            "tidegate at {}\n  {}\n",
            client.base(),
            split_summary(&v["routing"]).replace('\n', "\n  ")
        );
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

/// The replicas table of `GET /v1/cluster`, as `tidegate cluster` prints it.
pub fn cluster_table(answered_by: &str, v: &Value) -> String {
    let log = &v["log"];
    let mut out = format!(
        "answered by {} at {answered_by}\nlog: {} {} ({}), state hash {}\n",
        v["self"].as_str().unwrap_or("this node"),
        log["kind"].as_str().unwrap_or("?"),
        log["id"].as_str().unwrap_or("?"),
        log["where"].as_str().unwrap_or("?"),
        log["state_hash"].as_str().unwrap_or("-"),
    );
    let rows: Vec<[String; 8]> = v["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let text = |key: &str| r[key].as_str().unwrap_or("-").to_owned();
            let me = if r["self"] == true { "*" } else { "" };
            [
                format!("{}{me}", text("id")),
                text("zone"),
                text("status").to_uppercase(),
                num(&r["applied_version"]),
                num(&r["behind"]),
                num(&r["format"]),
                text("last_seen"),
                text("url"),
            ]
        })
        .collect();
    let header = ["REPLICA", "ZONE", "STATUS", "VERSION", "BEHIND", "FORMAT", "LAST SEEN", "URL"]
        .map(String::from);
    let mut widths = [0; 8];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> =
            row.iter().zip(widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str("(* = the replica that answered)");
    out
}

pub fn cluster(args: &ClientArgs) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.call("GET", "/v1/cluster", None)?;
    client.print(&value, |v| cluster_table(client.base(), v));
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

pub fn audit(
    args: &ClientArgs,
    limit: usize,
    before: Option<u64>,
    all: bool,
) -> Result<(), String> {
    let client = Client::new(args)?;
    let page_path = |before: Option<u64>| match before {
        Some(before) => format!("/v1/audit?limit={limit}&before={before}"),
        None => format!("/v1/audit?limit={limit}"),
    };
    if !all {
        let value = client.call("GET", &page_path(before), None)?;
        client.print(&value, |v| {
            let mut lines: Vec<String> =
                v["entries"].as_array().into_iter().flatten().map(audit_line).collect();
            if let Some(next) = v["next_before"].as_u64() {
                lines.push(format!("(older: tidegate audit --before {next})"));
            }
            lines.join("\n")
        });
        return Ok(());
    }
    // Every page back to version 1: one line per record (with --json, one JSON object per line).
    let mut before = before;
    loop {
        let mut busy = 0;
        let value = loop {
            match client.call("GET", &page_path(before), None) {
                // Pages older than the server's memory are read one at a time: wait our turn.
                Err(e) if e.contains("audit_busy") && busy < 60 => {
                    busy += 1;
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
                other => break other?,
            }
        };
        for entry in value["entries"].as_array().into_iter().flatten() {
            if client.json {
                println!("{}", serde_json::to_string(entry).unwrap_or_default());
            } else {
                println!("{}", audit_line(entry));
            }
        }
        match value["next_before"].as_u64() {
            Some(next) => before = Some(next),
            None => return Ok(()),
        }
    }
}

// ---- drains and zones ----

fn drain_line(d: &Value) -> String {
    let done = d["steps_done"].as_u64().unwrap_or(0);
    let total = d["steps_total"].as_u64().unwrap_or(0).max(1);
    let width = 20;
    let filled = (done * width / total) as usize;
    let kind = if d["mode"] == "evacuate" { "evacuation" } else { "drain" };
    let zone = match d["domain"].as_str() {
        Some(domain) if domain != "default" => {
            format!("{} in domain {domain}", d["zone"].as_str().unwrap_or("?"))
        }
        _ => d["zone"].as_str().unwrap_or("?").to_owned(),
    };
    // A zone drain among three or more names its receivers.
    let receivers: Vec<&str> = d["receiving_zones"]
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let zone =
        if receivers.len() > 1 { format!("{zone} to {}", receivers.join(", ")) } else { zone };
    format!(
        "{kind} {} of {zone} ({}): [{}{}] {done}/{total} steps, {}% now, {}% -> {}% every {}",
        d["id"],
        d["state"].as_str().unwrap_or("?"),
        "#".repeat(filled),
        "-".repeat(width as usize - filled),
        num(&d["current_percent"]),
        num(&d["from_percent"]),
        num(&d["target_percent"]),
        d["interval"].as_str().unwrap_or("?"),
    )
}

fn zone_line(z: &Value) -> String {
    let rate = match z["error_rate"].as_f64() {
        Some(rate) => format!("{:.2}% errors over {} requests", rate * 100.0, z["requests"]),
        None => format!("health unknown ({})", z["unknown_reason"].as_str().unwrap_or("no data")),
    };
    let c = &z["capacity"];
    let load = match (c["load_rps"].as_f64(), c["allowed_rps"].as_f64()) {
        (Some(load), Some(allowed)) => format!("  load {load:.0}/{allowed:.0} rps allowed"),
        (None, Some(allowed)) => format!("  load unknown/{allowed:.0} rps allowed"),
        _ if c["checked"] == true => "  capacity unknown".to_owned(),
        _ => String::new(),
    };
    format!(
        "{:<8} {:<6} {:<10} share {:>6.2}%  {rate}{load}",
        z["zone"].as_str().unwrap_or("?"),
        z["color"].as_str().unwrap_or("?"),
        z["state"].as_str().unwrap_or("?"),
        z["share_percent"].as_f64().unwrap_or(0.0),
    )
}

pub fn drain_start(args: &DrainStartArgs) -> Result<(), String> {
    let client = Client::new(&args.client)?;
    let mut guard = serde_json::Map::new();
    if let Some(v) = args.max_error_rate {
        guard.insert("max_error_rate".into(), json!(v));
    }
    if let Some(v) = args.min_requests {
        guard.insert("min_requests".into(), json!(v));
    }
    if let Some(v) = args.breaches {
        guard.insert("breaches".into(), json!(v));
    }
    if let Some(v) = &args.on_breach {
        guard.insert("on_breach".into(), json!(v));
    }
    let mut body = json!({ "zone": args.zone, "target_percent": args.to, "guard": guard, "reason": args.reason });
    if let Some(step) = args.step {
        body["step_percent"] = json!(step);
    }
    if let Some(every) = &args.every {
        body["interval"] = json!(every);
    }
    if let Some(mode) = &args.mode {
        body["mode"] = json!(mode);
    }
    if let Some(domain) = &args.domain {
        body["domain"] = json!(domain);
    }
    if args.freeze {
        body["freeze"] = json!(true);
    }
    if args.no_freeze {
        body["freeze"] = json!(false);
    }
    if let Some(window) = &args.freeze_window {
        body["freeze_window"] = json!(window);
    }
    if !args.receivers.is_empty() {
        body["to"] = json!(args.receivers);
    }
    let value = client.call("POST", "/v1/drains", Some(body))?;
    client.print(&value, |d| format!("started {}", drain_line(d)));
    if !args.follow.wait {
        return Ok(());
    }
    let path = format!("/v1/drains/{}", value["id"]);
    let end = follow(&client, &path, &args.follow, drain_ended, |d| {
        let mut line = drain_line(d);
        if let Some(hold) = d["hold_reason"].as_str() {
            line.push_str(&format!(" (held: {hold})"));
        }
        line
    })?;
    client.print(&end, |d| format!("ended {}", drain_line(d)));
    match end["state"].as_str() {
        Some("completed") => Ok(()),
        other => Err(format!("drain {} ended {}", end["id"], other.unwrap_or("?"))),
    }
}

/// A drain that will not step again.
fn drain_ended(d: &Value) -> bool {
    matches!(d["state"].as_str(), Some("completed" | "aborted" | "rolled_back"))
}

/// A run that will not step again.
fn run_ended(r: &Value) -> bool {
    matches!(r["state"].as_str(), Some("completed" | "aborted" | "rolled_back" | "failed"))
}

/// How often `--wait` asks.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Polls `path` until `ended` says so (or `--timeout` passes), printing `line` to stderr each
/// time it changes; the last answer. A failed poll (a replica restarting) is retried until the
/// timeout, not fatal.
fn follow(
    client: &Client,
    path: &str,
    args: &FollowArgs,
    ended: impl Fn(&Value) -> bool,
    line: impl Fn(&Value) -> String,
) -> Result<Value, String> {
    let deadline = match &args.timeout {
        Some(t) => Some(
            std::time::Instant::now()
                + std::time::Duration::from_millis(
                    crate::duration::parse_duration_ms(t).map_err(|e| format!("--timeout: {e}"))?,
                ),
        ),
        None => None,
    };
    let mut last = String::new();
    loop {
        match client.call("GET", path, None) {
            Ok(value) => {
                if ended(&value) {
                    return Ok(value);
                }
                let now = line(&value);
                if now != last {
                    eprintln!("{now}");
                    last = now;
                }
            }
            Err(e) => eprintln!("(still waiting: {e})"),
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(format!(
                "gave up waiting after {}; it goes on: {path}",
                args.timeout.as_deref().unwrap_or("?")
            ));
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
}

/// A drain's path: the one named, else the active drain, else the latest (so `drain status`
/// still answers once the drain ended).
fn drain_path(client: &Client, id: Option<u64>) -> Result<String, String> {
    match id {
        Some(id) => Ok(format!("/v1/drains/{id}")),
        None => match client.call("GET", "/v1/drains/current", None) {
            Ok(current) => Ok(format!("/v1/drains/{}", current["id"])),
            Err(none) => {
                let all = client.call("GET", "/v1/drains", None)?;
                let latest = all["drains"]
                    .as_array()
                    .and_then(|list| list.iter().filter_map(|d| d["id"].as_u64()).max());
                latest.map(|id| format!("/v1/drains/{id}")).ok_or(none)
            }
        },
    }
}

pub fn drain_status(args: &ClientArgs, id: Option<u64>) -> Result<(), String> {
    let client = Client::new(args)?;
    let path = drain_path(&client, id)?;
    let drain = client.call("GET", &path, None)?;
    let zones = client.call("GET", "/v1/zones", None)?;
    let value = json!({ "drain": drain, "zones": zones["zones"] });
    client.print(&value, |v| {
        let d = &v["drain"];
        let mut out = drain_line(d);
        if let Some(hold) = d["hold_reason"].as_str() {
            out.push_str(&format!("\n  held: {hold}"));
        }
        if let Some(next) = d["next_step_at"].as_str() {
            out.push_str(&format!("\n  next check: {next}"));
        }
        out.push_str(&freeze_lines(&d["freeze"]));
        let g = &d["guard"];
        out.push_str(&format!(
            "\n  guard: error rate <= {}% with >= {} requests, {} breach(es) -> {}",
            g["max_error_rate"].as_f64().unwrap_or(0.0) * 100.0,
            g["min_requests"],
            g["breaches"],
            g["on_breach"].as_str().unwrap_or("?")
        ));
        for z in v["zones"].as_array().into_iter().flatten() {
            out.push_str(&format!("\n  {}", zone_line(z)));
        }
        out
    });
    Ok(())
}

/// A loss-less drain's freeze in progress and its last finished freezes, for `drain status`.
fn freeze_lines(f: &Value) -> String {
    if f["enabled"] != true {
        return String::new();
    }
    let mut out = format!(
        "\n  loss-less steps: freeze, switch, unfreeze (window {} ms)",
        f["window_ms"].as_u64().unwrap_or(0)
    );
    if let Some(c) = f["current"].as_object() {
        let phase = c.get("phase").and_then(Value::as_str).unwrap_or("?");
        let units = c.get("units").and_then(Value::as_str).unwrap_or("?");
        out.push_str(&match phase {
            "freezing" => format!(
                "\n  phase: freezing units {units} (v{}), waiting for every subscriber",
                c["frozen_version"]
            ),
            _ => format!(
                "\n  phase: switched units {units} (v{}), still frozen until every subscriber applies it",
                c["switched_version"]
            ),
        });
    }
    let finished = f["finished"].as_array().map(Vec::as_slice).unwrap_or_default();
    for r in finished.iter().rev().take(5).rev() {
        let switch = r["switch_after_ms"]
            .as_u64()
            .map_or("not switched".to_owned(), |ms| format!("applied everywhere after {ms} ms"));
        out.push_str(&format!(
            "\n  step {}: {} units frozen {} ms, {switch}{}",
            r["step"],
            r["units"],
            r["window_ms"],
            r["note"].as_str().map(|n| format!(" ({n})")).unwrap_or_default()
        ));
    }
    out
}

pub fn drain_control(
    args: &ClientArgs,
    id: Option<u64>,
    action: &str,
    reason: &str,
) -> Result<(), String> {
    let client = Client::new(args)?;
    let path = format!("{}/{action}", drain_path(&client, id)?);
    let value = client.call("POST", &path, Some(json!({ "reason": reason })))?;
    client.print(&value, drain_line);
    Ok(())
}

pub fn zones(args: &ClientArgs) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.call("GET", "/v1/zones", None)?;
    client.print(&value, |v| {
        let mut out = format!(
            "routing version {}, health window {}",
            v["version"],
            v["window"].as_str().unwrap_or("?")
        );
        for z in v["zones"].as_array().into_iter().flatten() {
            out.push_str(&format!("\n  {}", zone_line(z)));
        }
        out
    });
    Ok(())
}

pub fn restore(
    args: &ClientArgs,
    zone: &str,
    to: Option<f64>,
    step: Option<f64>,
    every: Option<&str>,
    reason: &str,
) -> Result<(), String> {
    let client = Client::new(args)?;
    let mut body = json!({ "reason": reason });
    if let Some(to) = to {
        body["target_percent"] = json!(to);
    }
    if let Some(step) = step {
        body["step_percent"] = json!(step);
    }
    if let Some(every) = every {
        body["interval"] = json!(every);
    }
    let value = client.call("POST", &format!("/v1/zones/{}/restore", encode(zone)), Some(body))?;
    client.print(&value, |d| format!("restoring: {}", drain_line(d)));
    Ok(())
}

// ---- plans ----

fn plan_line(p: &Value) -> String {
    let drill = match p["last_drill"].as_object() {
        Some(d) => format!(
            "; last drill: run {} {} in {} ({} the RTO) at {}",
            d["id"],
            d["outcome"].as_str().unwrap_or("?"),
            d["switch_duration"].as_str().unwrap_or("?"),
            d["rto_verdict"].as_str().unwrap_or("?"),
            d["started_at"].as_str().unwrap_or("?"),
        ),
        None => "; never drilled".to_owned(),
    };
    let active = match p["active_run"].as_object() {
        Some(r) => format!("; run {} is {}", r["id"], r["state"].as_str().unwrap_or("?")),
        None => String::new(),
    };
    format!(
        "{} (revision {}): {} step(s), {} precondition(s), RTO {}; by {} at {}: {}{drill}{active}",
        p["name"].as_str().unwrap_or("?"),
        p["revision"],
        p["steps"].as_array().map_or(0, Vec::len),
        p["preconditions"].as_array().map_or(0, Vec::len),
        p["rto"].as_str().unwrap_or("?"),
        p["updated_by"].as_str().unwrap_or("?"),
        p["updated_at"].as_str().unwrap_or("?"),
        p["reason"].as_str().unwrap_or(""),
    )
}

pub fn plans_list(args: &ClientArgs) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.call("GET", "/v1/plans", None)?;
    client.print(&value, |v| {
        let plans = v["plans"].as_array().cloned().unwrap_or_default();
        if plans.is_empty() {
            return "no plans (PUT /v1/plans/{name} stores one)".to_owned();
        }
        plans.iter().map(plan_line).collect::<Vec<_>>().join("\n")
    });
    Ok(())
}

pub fn plan_show(args: &ClientArgs, name: &str) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = client.call("GET", &format!("/v1/plans/{}", encode(name)), None)?;
    client.print(&value, |p| {
        let mut out = plan_line(p);
        for c in p["preconditions"].as_array().into_iter().flatten() {
            let check = match (c["promql"].as_str(), c["http"].as_str()) {
                (Some(q), _) => format!("promql {q}"),
                (_, Some(u)) => format!("http {u}"),
                _ => "?".to_owned(),
            };
            out.push_str(&format!(
                "\n  precondition {}: {check}",
                c["name"].as_str().unwrap_or("?")
            ));
        }
        for (i, s) in p["steps"].as_array().into_iter().flatten().enumerate() {
            out.push_str(&format!("\n  {}. {s}", i + 1));
        }
        out
    });
    Ok(())
}

pub fn plan_dry_run(args: &ClientArgs, name: &str) -> Result<(), String> {
    let client = Client::new(args)?;
    let value =
        client.call("POST", &format!("/v1/plans/{}/dry-run", encode(name)), Some(json!({})))?;
    client.print(&value, |d| {
        let mut out = format!(
            "dry run of {} (revision {}): {}; expected {} against an RTO of {} ({})",
            d["plan"].as_str().unwrap_or("?"),
            d["revision"],
            if d["would_start"] == true { "would start" } else { "would NOT start" },
            d["expected_duration"].as_str().unwrap_or("?"),
            d["rto"].as_str().unwrap_or("?"),
            if d["fits_rto"] == true { "fits" } else { "MISSES" },
        );
        for c in d["preconditions"].as_array().into_iter().flatten() {
            let result = match c["passed"].as_bool() {
                Some(true) => "true".to_owned(),
                Some(false) => "false".to_owned(),
                None => format!("unknown ({})", c["error"].as_str().unwrap_or("?")),
            };
            out.push_str(&format!(
                "\n  precondition {}: {result}",
                c["name"].as_str().unwrap_or("?")
            ));
        }
        for s in d["steps"].as_array().into_iter().flatten() {
            let c = &s["capacity"];
            let capacity = match c["verdict"].as_str() {
                Some("fits") | Some("exceeds") => format!(
                    "; {} {} -> {} rps of {} allowed",
                    c["zone"].as_str().unwrap_or("?"),
                    num(&c["current_rps"].as_f64().map(f64::round).into()),
                    num(&c["projected_rps"].as_f64().map(f64::round).into()),
                    num(&c["allowed_rps"].as_f64().map(f64::round).into()),
                ),
                Some("unknown") => {
                    format!("; capacity unknown: {}", c["detail"].as_str().unwrap_or("?"))
                }
                _ => String::new(),
            };
            out.push_str(&format!(
                "\n  {}. {}: blue {}% -> {}% ({}% of users move){capacity}",
                s["index"].as_u64().unwrap_or(0) + 1,
                s["description"].as_str().unwrap_or("?"),
                num(&s["blue_percent_before"]),
                num(&s["blue_percent_after"]),
                num(&s["users_moved_percent"]),
            ));
            for note in s["channels"].as_array().into_iter().flatten() {
                out.push_str(&format!("\n     {}", note.as_str().unwrap_or("?")));
            }
        }
        for h in d["holds"].as_array().into_iter().flatten() {
            out.push_str(&format!("\n  hold: {}", h.as_str().unwrap_or("?")));
        }
        out
    });
    Ok(())
}

fn ms(v: &Value) -> String {
    v.as_u64().map_or("-".to_owned(), |ms| format!("{:.1}s", ms as f64 / 1000.0))
}

/// A run's report as text: the header, then one line per step (times since the start).
fn report_text(r: &Value) -> String {
    let mut out = format!(
        "{} {} of {} (revision {}): {}{}; switch {} against an RTO of {} ({}); started by {}: {}",
        if r["drill"] == true { "drill" } else { "run" },
        r["id"],
        r["plan"].as_str().unwrap_or("?"),
        r["revision"],
        r["state"].as_str().unwrap_or("?"),
        r["current_step"].as_str().map(|s| format!(" at `{s}`")).unwrap_or_default(),
        r["switch_duration"].as_str().unwrap_or("?"),
        r["rto"].as_str().unwrap_or("?"),
        r["rto_verdict"].as_str().unwrap_or("?"),
        r["started_by"].as_str().unwrap_or("?"),
        r["reason"].as_str().unwrap_or(""),
    );
    for reason in [&r["hold_reason"], &r["drain_hold_reason"], &r["fail_reason"]] {
        if let Some(text) = reason.as_str() {
            out.push_str(&format!("\n  {text}"));
        }
    }
    for t in r["timeline"].as_array().into_iter().flatten() {
        let started = t["started_ms"].as_u64().unwrap_or(0);
        let base = r["started_ms"].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "\n  {}. {}: started +{}, converged +{}, settled +{}",
            t["index"].as_u64().unwrap_or(0) + 1,
            t["step"].as_str().unwrap_or("?"),
            ms(&json!(started.saturating_sub(base))),
            ms(&t["converged_after_ms"]),
            ms(&t["settled_after_ms"]),
        ));
    }
    for z in r["errors"].as_array().into_iter().flatten() {
        let rate = z["max_error_rate"]
            .as_f64()
            .map_or("unknown".to_owned(), |e| format!("{:.1}%", e * 100.0));
        out.push_str(&format!(
            "\n  errors in {}: at most {rate} at the step boundaries",
            z["zone"].as_str().unwrap_or("?")
        ));
    }
    out
}

pub fn plan_run(
    args: &ClientArgs,
    name: &str,
    reason: &str,
    revision: Option<u64>,
    hold: Option<&str>,
    wait: &FollowArgs,
) -> Result<(), String> {
    let client = Client::new(args)?;
    let mut body = json!({ "reason": reason });
    if let Some(revision) = revision {
        body["plan_revision"] = json!(revision);
    }
    let path = match hold {
        Some(hold) => {
            body["hold"] = json!(hold);
            format!("/v1/plans/{}/drill", encode(name))
        }
        None => format!("/v1/plans/{}/run", encode(name)),
    };
    let value = client.call("POST", &path, Some(body))?;
    client.print(&value, |r| {
        format!(
            "started {}; follow it with `tidegate plans report {name} {}`",
            report_text(r),
            r["id"]
        )
    });
    if !wait.wait {
        return Ok(());
    }
    let id = value["id"].as_u64().or(value["run"]["id"].as_u64()).unwrap_or(0);
    let path = format!("/v1/plans/{}/runs/{id}", encode(name));
    let end = follow(&client, &path, wait, run_ended, |r| {
        let mut line = format!(
            "run {id}: {} at step {} of {} ({})",
            r["state"].as_str().unwrap_or("?"),
            r["step"].as_u64().map_or(0, |s| s + 1),
            r["steps_total"],
            r["current_step"].as_str().unwrap_or("-")
        );
        if let Some(hold) = r["hold_reason"].as_str().or(r["drain_hold_reason"].as_str()) {
            line.push_str(&format!(" (held: {hold})"));
        }
        line
    })?;
    client.print(&end, report_text);
    match end["state"].as_str() {
        Some("completed") => Ok(()),
        other => Err(format!("run {id} of plan {name} ended {}", other.unwrap_or("?"))),
    }
}

pub fn plan_report(args: &ClientArgs, name: &str, run: Option<u64>) -> Result<(), String> {
    let client = Client::new(args)?;
    let value = match run {
        Some(id) => client.call("GET", &format!("/v1/plans/{}/runs/{id}", encode(name)), None)?,
        None => {
            let runs = client.call("GET", &format!("/v1/plans/{}/runs", encode(name)), None)?;
            match runs["runs"].get(0) {
                Some(latest) => latest.clone(),
                None => return Err(format!("plan {name} has never run")),
            }
        }
    };
    client.print(&value, report_text);
    Ok(())
}

pub fn plan_control(
    args: &ClientArgs,
    name: &str,
    action: &str,
    run: Option<u64>,
    reason: &str,
) -> Result<(), String> {
    let client = Client::new(args)?;
    let id = match run {
        Some(id) => id,
        None => {
            let plan = client.call("GET", &format!("/v1/plans/{}", encode(name)), None)?;
            plan["active_run"]["id"]
                .as_u64()
                .ok_or_else(|| format!("plan {name} has no active run; give --run ID"))?
        }
    };
    let path = format!("/v1/plans/{}/runs/{id}/{action}", encode(name));
    let value = client.call("POST", &path, Some(json!({ "reason": reason })))?;
    client.print(&value, report_text);
    Ok(())
}
