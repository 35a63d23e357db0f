//! The fast tag listener (`[server] fast_port`): one running binary, the same requests sent to
//! its Rocket port and its fast port, and the answers compared (status, body, headers), for open
//! reads and for reads that need a token; plus what the fast port refuses to serve, and the
//! configuration it refuses.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{OPERATOR_TOKEN, SERVICE_TOKEN, VIEWER_TOKEN, agent, config_toml};
use tidegate::config::token_sha256_hex;

/// Two `tidegate serve` processes on one configuration: one whose main port is Rocket alone
/// (`fast_path = false`) with a fast listener, and one with the default main port, the
/// dispatcher (`http_fast::dispatch`). Their base URLs: `main` (Rocket), `fast` (the fast
/// listener) and `dispatch`.
struct Both {
    children: Vec<Child>,
    main: String,
    fast: String,
    dispatch: String,
    _dir: tempfile::TempDir,
}

impl Drop for Both {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `toml` must have a `[server]` table with `fast_port = 0`.
fn start(toml: &str) -> Both {
    assert!(toml.contains("[server]\nfast_port = 0"), "{toml}");
    let dir = tempfile::tempdir().unwrap();
    let rocket = toml.replace("[server]\n", "[server]\nfast_path = false\n");
    let (rocket_child, main, fast) = spawn(dir.path(), "rocket", &rocket);
    let (dispatch_child, dispatch, _) = spawn(dir.path(), "dispatch", toml);
    Both {
        children: vec![rocket_child, dispatch_child],
        main,
        fast: fast.expect("the fast listener is announced"),
        dispatch,
        _dir: dir,
    }
}

/// Starts a `tidegate serve` on `toml`; its main URL and its fast listener's, if it has one.
fn spawn(dir: &std::path::Path, name: &str, toml: &str) -> (Child, String, Option<String>) {
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, toml).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--address", "127.0.0.1", "--port", "0", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join(format!("data-{name}")))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tidegate starts");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let wants_fast = toml.contains("fast_port");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("tidegate listening on ") {
                let _ = tx.send(("main", url.to_owned()));
            } else if let Some(url) = line.strip_prefix("tidegate fast tag listener at ") {
                let _ = tx.send(("fast", url.to_owned()));
            }
        }
    });
    let (mut main, mut fast) = (None, None);
    while main.is_none() || (wants_fast && fast.is_none()) {
        let (which, url) =
            rx.recv_timeout(Duration::from_secs(20)).expect("tidegate announces its listeners");
        if which == "main" { main = Some(url) } else { fast = Some(url) }
    }
    (child, main.unwrap(), fast)
}

/// One request of the table: method, path and query, headers, body.
struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Option<Vec<u8>>,
}

fn get(name: &'static str, path: &str) -> Case {
    Case { name, method: "GET", path: path.to_owned(), headers: vec![], body: None }
}

fn post(name: &'static str, body: impl Into<Vec<u8>>) -> Case {
    Case {
        name,
        method: "POST",
        path: "/v1/tag".into(),
        headers: vec![("content-type", "application/json".into())],
        body: Some(body.into()),
    }
}

impl Case {
    fn token(mut self, token: &str) -> Case {
        self.headers.push(("authorization", format!("Bearer {token}")));
        self
    }

    fn header(mut self, name: &'static str, value: &str) -> Case {
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.to_owned()));
        self
    }
}

/// The headers that are part of an answer (not `date`, which moves with the clock).
const COMPARED: [&str; 8] = [
    "content-type",
    "content-length",
    "x-tidegate-color",
    "x-tidegate-version",
    "server",
    "permissions-policy",
    "x-content-type-options",
    "x-frame-options",
];

#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    headers: Vec<(&'static str, Option<String>)>,
    body: String,
}

fn send(base: &str, case: &Case) -> Seen {
    let url = format!("{base}{}", case.path);
    let agent = agent();
    let mut response = match case.method {
        "GET" => {
            let mut request = agent.get(&url);
            for (name, value) in &case.headers {
                request = request.header(*name, value);
            }
            request.call()
        }
        method => {
            let mut request = if method == "PUT" { agent.put(&url) } else { agent.post(&url) };
            for (name, value) in &case.headers {
                request = request.header(*name, value);
            }
            request.send(case.body.clone().unwrap_or_default())
        }
    }
    .unwrap_or_else(|e| panic!("{}: {url}: {e}", case.name));
    let headers = COMPARED
        .iter()
        .map(|name| {
            let value = response.headers().get(*name).map(|v| v.to_str().unwrap().to_owned());
            (*name, value)
        })
        .collect();
    let status = response.status().as_u16();
    let body = response.body_mut().with_config().limit(64 << 20).read_to_string().unwrap();
    Seen { status, headers, body }
}

/// Sends every case to both listeners and asserts the answers are the same; returns the
/// statuses, so the caller can check the table covered what it meant to.
fn same_answers(both: &Both, cases: &[Case]) -> Vec<u16> {
    cases
        .iter()
        .map(|case| {
            let main = send(&both.main, case);
            let fast = send(&both.fast, case);
            assert_eq!(fast, main, "case `{}`: the fast listener answered differently", case.name);
            let dispatch = send(&both.dispatch, case);
            assert_eq!(
                dispatch, main,
                "case `{}`: the default main port answered differently from Rocket",
                case.name
            );
            main.status
        })
        .collect()
}

fn ids(n: usize) -> String {
    let ids: Vec<String> = (0..n).map(|i| format!("\"user-{i}\"")).collect();
    format!("{{\"user_ids\":[{}]}}", ids.join(","))
}

#[test]
fn open_reads_answer_byte_for_byte_as_the_rocket_routes() {
    // `reject` makes a missing user ID an error, so no answer is random.
    let both = start(&config_toml(
        "fallback = \"reject\"\n[server]\nfast_port = 0\n[limits]\nmax_batch = 3\nmax_body_bytes = 1024",
    ));
    let too_big = format!("{{\"user_ids\":[\"{}\"]}}", "x".repeat(2000));
    let cases = vec![
        get("good", "/v1/tag?user_id=user-42"),
        get("other parameters too", "/v1/tag?x=1&user_id=caf%C3%A9+au+lait&y"),
        get("missing user", "/v1/tag"),
        get("empty user", "/v1/tag?user_id="),
        get("control character", "/v1/tag?user_id=a%01b"),
        get("too long", &format!("/v1/tag?user_id={}", "u".repeat(300))),
        get("not UTF-8", "/v1/tag?user_id=%ff%fe"),
        get("given twice", "/v1/tag?user_id=a&user_id=b"),
        get("operator token", "/v1/tag?user_id=u").token(OPERATOR_TOKEN),
        get("unknown token", "/v1/tag?user_id=u").token("tg_nobody"),
        get("not a bearer", "/v1/tag?user_id=u").header("authorization", "Basic dTpw"),
        get("empty bearer", "/v1/tag?user_id=u").header("authorization", "Bearer  "),
        post("batch", ids(3)),
        post("empty batch", "{\"user_ids\":[]}"),
        post("over the batch limit", ids(4)),
        post("bad ID in a batch", "{\"user_ids\":[\"a\",\"\"]}"),
        post("bad ID among good ones", "{\"user_ids\":[\"a\",\"b\",\"c\\u0001\"]}"),
        post("not a string in a batch", "{\"user_ids\":[\"a\",7]}"),
        post("IDs with quotes and backslashes", "{\"user_ids\":[\"q\\\"t\",\"b\\\\s\",\"é😀\"]}"),
        post("not JSON at all", "hello"),
        post("escaped ID", "{\"user_ids\":[\"a\\u00e9\"]}"),
        post("escaped control character", "{\"user_ids\":[\"a\\n\"]}"),
        post("not JSON", "{\"user_ids\":["),
        post("unknown field", "{\"user_ids\":[],\"x\":1}"),
        post("not UTF-8 body", b"{\"user_ids\":[\"\xff\"]}".to_vec()),
        post("over the body limit", too_big),
        post("form body", "user_ids=a").header("content-type", "application/x-www-form-urlencoded"),
        post("JSON with charset", ids(2)).header("content-type", "application/json; charset=utf-8"),
        post("vendor JSON", ids(1)).header("content-type", "application/vnd.x+json"),
        post("batch with an unknown token", ids(1)).token("tg_nobody"),
    ];
    let statuses = same_answers(&both, &cases);
    for (case, status) in cases.iter().zip(&statuses) {
        eprintln!("{:>3} {}", status, case.name);
    }
    for want in [200, 400, 401, 413, 415] {
        assert!(statuses.contains(&want), "no case answered {want}: {statuses:?}");
    }
}

#[test]
fn reads_that_need_a_token_are_gated_alike() {
    let both = start(&config_toml(&format!(
        "service_tokens_sha256 = [\"{}\"]\n[server]\nfast_port = 0",
        token_sha256_hex(SERVICE_TOKEN)
    )));
    let cases = vec![
        get("anonymous", "/v1/tag?user_id=u"),
        get("service token", "/v1/tag?user_id=u").token(SERVICE_TOKEN),
        get("operator token", "/v1/tag?user_id=u").token(OPERATOR_TOKEN),
        get("viewer token", "/v1/tag?user_id=u").token(VIEWER_TOKEN),
        get("lower-case scheme", "/v1/tag?user_id=u")
            .header("authorization", &format!("bearer {SERVICE_TOKEN}")),
        get("unknown token", "/v1/tag?user_id=u").token("tg_nobody"),
        post("anonymous batch", ids(2)),
        post("service batch", ids(2)).token(SERVICE_TOKEN),
        post("anonymous form", "a=b").header("content-type", "text/plain"),
    ];
    let statuses = same_answers(&both, &cases);
    assert_eq!(statuses, [401, 200, 200, 200, 200, 401, 401, 200, 415]);
}

fn ack(name: &'static str, id: &str, body: &str) -> Case {
    let mut case = post(name, body);
    case.path = format!("/v1/subscribers/{id}/ack");
    case
}

/// Acknowledgements (a write: they steer drains) are gated, parsed and answered alike; each case
/// goes to the main port first, then to the fast port, so a registration made by the first is
/// seen by the second just as a repeated ack on one port would see it.
#[test]
fn acknowledgements_answer_alike_and_refuse_anonymous_and_viewer_callers() {
    let both = start(&config_toml(&format!(
        "service_tokens_sha256 = [\"{}\"]\n[server]\nfast_port = 0",
        token_sha256_hex(SERVICE_TOKEN)
    )));
    let register = "{\"version\":0,\"zone\":\"az-a\",\"kind\":\"gw\"}";
    let cases = vec![
        ack("anonymous", "gw-1", register),
        ack("viewer", "gw-1", register).token(VIEWER_TOKEN),
        ack("unknown token", "gw-1", register).token("tg_nobody"),
        ack("unknown subscriber without zone", "gw-1", "{\"version\":0}").token(OPERATOR_TOKEN),
        ack("registers with zone and kind", "gw-1", register).token(OPERATOR_TOKEN),
        ack("known subscriber", "gw-1", "{\"version\":0}").token(OPERATOR_TOKEN),
        ack("another caller's subscriber", "gw-1", "{\"version\":0}").token(SERVICE_TOKEN),
        ack("service token", "svc-1", register).token(SERVICE_TOKEN),
        ack("future version", "gw-1", "{\"version\":999}").token(OPERATOR_TOKEN),
        ack("invalid subscriber ID", "bad%20id", register).token(OPERATOR_TOKEN),
        ack("not JSON", "gw-1", "{\"version\":").token(OPERATOR_TOKEN),
        ack("unknown field", "gw-1", "{\"version\":0,\"x\":1}").token(OPERATOR_TOKEN),
        ack("form body", "gw-1", "version=0")
            .token(OPERATOR_TOKEN)
            .header("content-type", "application/x-www-form-urlencoded"),
        ack("anonymous form", "gw-1", "version=0").header("content-type", "text/plain"),
    ];
    let statuses = same_answers(&both, &cases);
    for (case, status) in cases.iter().zip(&statuses) {
        eprintln!("{:>3} {}", status, case.name);
    }
    assert_eq!(&statuses[..3], [401, 403, 401], "anonymous and viewer callers are refused");
    assert_eq!(statuses[4..6], [200, 200]);
    for want in [400, 401, 403, 404, 415] {
        assert!(statuses.contains(&want), "no case answered {want}: {statuses:?}");
    }
}

#[test]
fn the_fast_port_serves_nothing_else_and_names_the_main_port() {
    let both = start(&config_toml("[server]\nfast_port = 0"));
    let main_port = both.main.rsplit(':').next().unwrap().to_owned();
    for case in [get("routing", "/v1/routing"), get("health", "/healthz")] {
        let seen = send(&both.fast, &case);
        assert_eq!(seen.status, 404, "{}", case.name);
        let body: serde_json::Value = serde_json::from_str(&seen.body).unwrap();
        assert_eq!(body["error"], "not_found");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("port {main_port}")), "{detail}");
        // The main port serves the same path.
        assert_ne!(send(&both.main, &case).status, 404, "{}", case.name);
    }
}

#[test]
fn a_fast_port_with_tls_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("x.pem");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(&pem, cert.cert.pem() + &cert.signing_key.serialize_pem()).unwrap();
    let toml = format!(
        "[server]\nfast_port = 0\n[server.tls]\ncerts = \"{0}\"\nkey = \"{0}\"\n",
        pem.display()
    );
    let error = tidegate::config::Config::from_toml_str(&toml).unwrap_err().to_string();
    assert!(error.contains("server.fast_port") && error.contains("server.tls"), "{error}");
    let same = tidegate::config::Config::from_toml_str("[server]\nport = 9000\nfast_port = 9000")
        .unwrap_err()
        .to_string();
    assert!(same.contains("server.fast_port"), "{same}");
}

/// Opens a watch stream with a raw socket and returns the status and the first event (from `id:`
/// to its blank line), or the status and the body head of a refusal.
fn first_event(base: &str, query: &str, token: Option<&str>) -> (u16, String) {
    first_event_after(base, "", query, token)
}

/// [`first_event`], after `before` (whole requests) on the same connection.
fn first_event_after(base: &str, before: &str, query: &str, token: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut socket = std::net::TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        socket,
        "{before}GET /v1/routing/watch{query} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n{auth}\r\n"
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = socket.read(&mut buf).expect("the stream answers");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen).into_owned();
        let status: u16 = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        if status != 200 && text.contains("}") {
            let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
            return (status, body);
        }
        if let Some(start) = text.find("id:")
            && let Some(len) = text[start..].find("\n\n")
        {
            return (status, text[start..start + len + 2].to_owned());
        }
    }
}

#[test]
fn watch_streams_on_the_fast_port_send_the_same_events_and_register_alike() {
    let both = start(&config_toml("[server]\nfast_port = 0"));
    let (main_status, main_event) = first_event(&both.main, "", None);
    let (fast_status, fast_event) = first_event(&both.fast, "", None);
    assert_eq!((main_status, fast_status), (200, 200));
    assert!(main_event.contains("event:routing"), "{main_event}");
    assert_eq!(fast_event, main_event);
    // A watch request after another request on the connection is served through hyper.
    let tag_first = "GET /v1/tag?user_id=u HTTP/1.1\r\nHost: x\r\n\r\n";
    let (status, through_hyper) = first_event_after(&both.fast, tag_first, "", None);
    assert_eq!(through_hyper, main_event, "status {status}");
    // Registering needs a writer: a viewer is refused alike on both ports.
    let as_viewer = "?subscriber_id=fast-1&zone=az-a&kind=test";
    let main_refused = first_event(&both.main, as_viewer, Some(VIEWER_TOKEN));
    let fast_refused = first_event(&both.fast, as_viewer, Some(VIEWER_TOKEN));
    assert_eq!(main_refused.0, 403);
    assert_eq!(fast_refused, main_refused);
    assert_eq!(first_event(&both.fast, as_viewer, None).0, 401);
    // An operator registers on the fast port; the main port's registry lists it.
    let (status, _) = first_event(&both.fast, as_viewer, Some(OPERATOR_TOKEN));
    assert_eq!(status, 200);
    let mut listed = agent()
        .get(&format!("{}/v1/subscribers", both.main))
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .call()
        .unwrap();
    let body = listed.body_mut().read_to_string().unwrap();
    assert!(body.contains("\"fast-1\""), "{body}");
}

/// The response head of a watch stream (after `before` on the same connection).
fn watch_head(base: &str, before: &str) -> String {
    use std::io::{Read, Write};
    let mut socket = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        socket,
        "{before}GET /v1/routing/watch HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = socket.read(&mut buf).expect("the stream answers");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen).into_owned();
        // The last head on the connection (a request sent `before` has its own).
        if let Some(at) = text.rfind("HTTP/1.1 200")
            && let Some(end) = text[at..].find("\r\n\r\n")
            && text[at..at + end].contains("event-stream")
        {
            return text[at..at + end].to_ascii_lowercase();
        }
    }
}

/// Every way a watch stream is served announces the heartbeat interval, so watchers size their
/// stall bound by the server's `[subscribers] heartbeat` instead of a copy of it.
#[test]
fn every_watch_stream_announces_its_heartbeat_interval() {
    let both = start(&config_toml("[server]\nfast_port = 0\n[subscribers]\nheartbeat = \"3s\""));
    let tag_first = "GET /v1/tag?user_id=u HTTP/1.1\r\nHost: x\r\n\r\n";
    for (name, base, before) in [
        ("main", &both.main, ""),
        ("fast", &both.fast, ""),
        ("fast via hyper", &both.fast, tag_first),
    ] {
        let head = watch_head(base, before);
        assert!(head.contains("x-tidegate-heartbeat-ms: 3000"), "{name}: {head}");
    }
}

/// HTTP/1.1 pipelining on the fast port (how a gateway acknowledging for many subscribers, or
/// the watch bench, sends acks): several requests written at once are answered in order, each
/// whole, on the one connection, a refused one among them without disturbing the others.
#[test]
fn pipelined_requests_are_answered_in_order_on_one_connection() {
    use std::io::{Read, Write};
    let both = start(&config_toml("[server]\nfast_port = 0"));
    let at = both.fast.trim_start_matches("http://").to_owned();
    let ack = |id: &str, token: &str| {
        let body = "{\"version\":0,\"zone\":\"az-a\",\"kind\":\"gw\"}";
        format!(
            "POST /v1/subscribers/{id}/ack HTTP/1.1\r\nHost: {at}\r\nContent-Type: application/json\r\n\
             Authorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let mut pipelined = String::new();
    for i in 0..20 {
        // Every fifth one carries a viewer's token: refused, and the connection goes on.
        let token = if i % 5 == 4 { VIEWER_TOKEN } else { OPERATOR_TOKEN };
        pipelined.push_str(&ack(&format!("pipe-{i}"), token));
    }
    pipelined.push_str(&format!(
        "GET /v1/tag?user_id=last HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\n\r\n"
    ));
    let mut stream = std::net::TcpStream::connect(&at).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    stream.write_all(pipelined.as_bytes()).unwrap();
    let mut answers = Vec::new();
    stream.read_to_end(&mut answers).unwrap();
    let answers = String::from_utf8(answers).unwrap();
    let statuses: Vec<&str> = answers
        .split("HTTP/1.1 ")
        .skip(1)
        .map(|answer| answer.split(' ').next().unwrap())
        .collect();
    let mut want: Vec<&str> = (0..20).map(|i| if i % 5 == 4 { "403" } else { "200" }).collect();
    want.push("200");
    assert_eq!(statuses, want, "{answers}");
    assert!(answers.trim_end().ends_with('}'), "the last answer is whole: {answers}");
    assert!(answers.contains("\"user_id\":\"last\""), "{answers}");
}

/// What a watch stream sends within `wait`, opened with extra `headers` (whole lines) after
/// `before` (whole requests) on the same connection.
fn watch_for(base: &str, before: &str, query: &str, headers: &str, wait: Duration) -> String {
    use std::io::{Read, Write};
    let mut socket = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    write!(
        socket,
        "{before}GET /v1/routing/watch{query} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n{headers}\r\n"
    )
    .unwrap();
    let deadline = std::time::Instant::now() + wait;
    let (mut seen, mut buf) = (Vec::new(), [0u8; 4096]);
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        socket.set_read_timeout(Some(left.max(Duration::from_millis(1)))).unwrap();
        match socket.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// A watcher resuming with `Last-Event-ID` may name the command log its version belongs to
/// (`log_id`). When that is another log (the coordinators were moved to a restored or new log
/// whose version happens to be the same), the version says nothing: the current table is sent,
/// so the client learns of the other log at once, and a registered subscriber is not counted as
/// having applied anything. Alike on the main port, the fast port, and the fast port through
/// hyper.
#[test]
fn a_resume_naming_another_log_gets_the_table_and_counts_as_no_acknowledgement() {
    let both = start(&config_toml("[server]\nfast_port = 0"));
    let (_, event) = first_event(&both.main, "", None);
    let data: serde_json::Value =
        serde_json::from_str(event.lines().find_map(|l| l.strip_prefix("data:")).unwrap()).unwrap();
    let (version, own_log) = (data["version"].as_u64().unwrap(), data["log_id"].as_str().unwrap());
    assert!(!own_log.is_empty());
    let tag_first = "GET /v1/tag?user_id=u HTTP/1.1\r\nHost: x\r\n\r\n";
    let resume = format!("Last-Event-ID: {version}\r\n");
    let wait = Duration::from_millis(600);
    for (name, base, before) in
        [("main", &both.main, ""), ("fast", &both.fast, ""), ("hyper", &both.fast, tag_first)]
    {
        // Resuming at the current version: nothing new is sent, with or without our log named.
        for query in [String::new(), format!("?log_id={own_log}")] {
            let text = watch_for(base, before, &query, &resume, wait);
            assert!(text.contains(" 200 "), "{name} {query}: {text}");
            assert!(!text.contains("event:routing"), "{name} {query}: {text}");
        }
        // Naming another log: the table comes at once.
        let text = watch_for(base, before, "?log_id=an-older-log", &resume, wait);
        assert!(text.contains(&format!("id:{version}\n")), "{name}: {text}");
        // A registered subscriber resuming from another log has applied nothing here; the
        // control, resuming from ours, counts as applied.
        let auth = format!("{resume}Authorization: Bearer {OPERATOR_TOKEN}\r\n");
        for (id, log) in
            [(format!("{name}-other"), "an-older-log"), (format!("{name}-own"), own_log)]
        {
            let query = format!("?subscriber_id={id}&zone=az-a&kind=test&log_id={log}");
            let text = watch_for(base, before, &query, &auth, Duration::from_millis(200));
            assert!(text.contains(" 200 "), "{name} {id}: {text}");
        }
        let mut listed = agent()
            .get(&format!("{}/v1/subscribers", both.main))
            .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
            .call()
            .unwrap();
        let body: serde_json::Value = listed.body_mut().read_json().unwrap();
        let applied = |id: String| {
            body["subscribers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["subscriber_id"] == id.as_str())
                .map(|s| s["applied_version"].as_u64().unwrap())
        };
        assert_eq!(applied(format!("{name}-other")), Some(0), "{name}: {body}");
        assert_eq!(applied(format!("{name}-own")), Some(version), "{name}: {body}");
    }
}

/// The default main port hands what is not the tag path to Rocket: the same answers as Rocket
/// alone, Rocket's own 404, refusals and media checks included.
#[test]
fn the_default_main_port_hands_the_rest_of_the_api_to_rocket() {
    let both = start(&config_toml("[server]\nfast_port = 0"));
    let put = |name: &'static str, path: &str, body: &str| Case {
        name,
        method: "PUT",
        path: path.to_owned(),
        headers: vec![("content-type", "application/json".into())],
        body: Some(body.as_bytes().to_vec()),
    };
    let cases = vec![
        get("health", "/healthz"),
        get("no such path", "/v1/nothing-here"),
        get("tag-like path", "/v1/tags"),
        get("openapi", "/openapi.json"),
        put("dial without a token", "/v1/dial", "{\"blue_percent\":10}"),
        put("dial with a bad body", "/v1/dial", "{\"blue_percent\":").token(OPERATOR_TOKEN),
        put("dial as a viewer", "/v1/dial", "{\"blue_percent\":10}").token(VIEWER_TOKEN),
        put("PUT on the tag path", "/v1/tag", "{}"),
    ];
    for case in &cases {
        let rocket = send(&both.main, case);
        let dispatch = send(&both.dispatch, case);
        assert_eq!(dispatch, rocket, "case `{}`", case.name);
        eprintln!("{:>3} {}", rocket.status, case.name);
    }
}

/// One kept-alive connection may mix the tag path and the rest: each answer is whole and in
/// order, the others' through an in-memory pipe to Rocket.
#[test]
fn one_connection_may_mix_tags_and_the_rest_of_the_api() {
    use std::io::{Read, Write};
    let both = start(&config_toml("[server]\nfast_port = 0"));
    let health = send(&both.dispatch, &get("health", "/healthz")).body;
    let tag = send(&both.dispatch, &get("tag", "/v1/tag?user_id=u-1")).body;
    let mut socket =
        std::net::TcpStream::connect(both.dispatch.trim_start_matches("http://")).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answers = Vec::new();
    for path in ["/v1/tag?user_id=u-1", "/healthz", "/v1/tag?user_id=u-1", "/healthz"] {
        write!(socket, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let (mut seen, mut buf) = (Vec::new(), [0u8; 4096]);
        let body = loop {
            let n = socket.read(&mut buf).unwrap();
            assert!(n > 0, "{path}: closed after {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned)
                    })
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or_else(|| panic!("{path}: no content-length in {head}"));
                if body.len() >= length {
                    assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
                    break body[..length].to_owned();
                }
            }
        };
        answers.push(body);
    }
    assert_eq!(answers, [tag.clone(), health.clone(), tag, health]);
}

/// A request with a cookie goes to Rocket, which knows the UI's session: a signed-in operator's
/// browser may read a tag where reads need a token. The fast listener, which knows no sessions,
/// refuses the same request: that is what the dispatcher must not do.
#[test]
fn a_request_with_the_ui_session_cookie_is_rockets() {
    let both = start(&config_toml(&format!(
        "service_tokens_sha256 = [\"{}\"]\n[server]\nfast_port = 0",
        token_sha256_hex(SERVICE_TOKEN)
    )));
    // The sign-in answers 303 with the session cookie: read that answer, do not follow it.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let cookies = |response: &ureq::http::Response<ureq::Body>| -> Vec<String> {
        response
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
            .collect()
    };
    let mut form = agent.get(&format!("{}/ui/login", both.dispatch)).call().unwrap();
    let jar = cookies(&form).join("; ");
    let html = form.body_mut().read_to_string().unwrap();
    let csrf = html.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap();
    let signed_in = agent
        .post(&format!("{}/ui/login", both.dispatch))
        .header("cookie", &jar)
        .header("content-type", "application/x-www-form-urlencoded")
        .send(format!("name=alice&token={OPERATOR_TOKEN}&csrf={csrf}"))
        .unwrap();
    assert_eq!(signed_in.status().as_u16(), 303);
    let session = cookies(&signed_in)
        .into_iter()
        .find(|c| c.starts_with("tg_session="))
        .expect("a session cookie");
    let read = |base: &str, cookie: Option<&str>| {
        let mut request = agent.get(&format!("{base}/v1/tag?user_id=u-1"));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.call().unwrap().status().as_u16()
    };
    assert_eq!(read(&both.dispatch, None), 401, "reads need a token here");
    assert_eq!(read(&both.dispatch, Some(&session)), 200, "the session reads the tag");
    assert_eq!(read(&both.fast, Some(&session)), 401, "the fast path knows no session");
}
