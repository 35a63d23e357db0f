//! HTTPS end to end, against the real binary: the test makes a CA and a server certificate
//! (rcgen), tidegate serves `[server.tls]`, and every client of tidegate (the `Router`'s watch,
//! the lane client, the CLI) connects with the CA and refuses without it. The UI's cookies are
//! `Secure` over TLS.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use serde_json::json;
use tidegate::client::lanes::{LaneClient, LaneClientError};
use tidegate::client::tls;
use tidegate::client::{Identity, Router, RouterOptions};

/// A CA, and a certificate for `localhost` and 127.0.0.1 that it signed, as PEM files in `dir`.
struct Pki {
    ca: PathBuf,
    certs: PathBuf,
    key: PathBuf,
}

fn make_ca(name: &str) -> (CertificateParams, KeyPair, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    (params, key, pem)
}

fn make_pki(dir: &Path) -> Pki {
    let (ca_params, ca_key, ca_pem) = make_ca("tidegate test CA");
    let issuer = Issuer::new(ca_params, ca_key);
    let mut params =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "tidegate test server");
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let pki =
        Pki { ca: dir.join("ca.pem"), certs: dir.join("server.pem"), key: dir.join("key.pem") };
    std::fs::write(&pki.ca, ca_pem).unwrap();
    std::fs::write(&pki.certs, cert.pem()).unwrap();
    std::fs::write(&pki.key, key.serialize_pem()).unwrap();
    pki
}

/// Another CA that signed nothing tidegate serves: trusting it must not be enough.
fn other_ca(dir: &Path) -> PathBuf {
    let path = dir.join("other-ca.pem");
    std::fs::write(&path, make_ca("someone else's CA").2).unwrap();
    path
}

fn start_tls_server(dir: &Path, pki: &Pki) -> Server {
    let config_file = dir.join("tidegate.toml");
    let tls = format!(
        "[server.tls]\ncerts = \"{}\"\nkey = \"{}\"\n",
        pki.certs.display(),
        pki.key.display()
    );
    std::fs::write(&config_file, config_toml(&tls)).unwrap();
    Server::start(&config_file, &dir.join("data"))
}

#[test]
fn https_is_served_and_verified_against_the_configured_ca_only() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let server = start_tls_server(dir.path(), &pki);
    assert!(server.url.starts_with("https://127.0.0.1:"), "{}", server.url);
    let base = server.url.clone();

    // With the CA: served.
    let agent = tls::agent(&base, Duration::from_secs(5), Some(&pki.ca)).unwrap();
    let mut response = agent.get(&format!("{base}/v1/routing")).call().unwrap();
    assert_eq!(response.status(), 200);
    let table: serde_json::Value = response.body_mut().read_json().unwrap();
    assert_eq!(table["version"], 1);
    // With another CA, or the system's roots: refused by the client.
    let other = tls::agent(&base, Duration::from_secs(5), Some(&other_ca(dir.path()))).unwrap();
    let refused = other.get(&format!("{base}/v1/routing")).call().unwrap_err().to_string();
    assert!(refused.contains("UnknownIssuer") || refused.contains("certificate"), "{refused}");
    match tls::agent(&base, Duration::from_secs(5), None) {
        Ok(system) => {
            let refused = system.get(&format!("{base}/v1/routing")).call().unwrap_err();
            assert!(refused.to_string().contains("UnknownIssuer"), "{refused}");
        }
        Err(e) => assert!(e.to_string().contains("root certificates"), "{e}"),
    }
    // Plain HTTP on the TLS port gets no answer a client could take for tidegate's.
    let plain = common::agent().get(&format!("http{}/v1/routing", &base[5..])).call();
    assert!(plain.is_err_and(|e| !e.to_string().is_empty()));
}

#[test]
fn the_ui_cookies_are_secure_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let server = start_tls_server(dir.path(), &pki);
    let base = server.url.clone();
    let certs: Vec<ureq::tls::Certificate<'static>> = tls::roots(Some(&pki.ca))
        .unwrap()
        .iter()
        .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
        .collect();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::new_with_certs(&certs))
                .build(),
        )
        .build()
        .into();
    let mut page = agent.get(&format!("{base}/ui/login")).call().unwrap();
    let form_cookie = page.headers().get("set-cookie").unwrap().to_str().unwrap().to_owned();
    assert!(
        form_cookie.starts_with("tg_login=") && form_cookie.contains("Secure"),
        "{form_cookie}"
    );
    let html = page.body_mut().read_to_string().unwrap();
    let start = html.find("name=\"csrf\" value=\"").unwrap() + 19;
    let csrf = &html[start..start + html[start..].find('"').unwrap()];
    let cookie = form_cookie.split(';').next().unwrap();
    let response = agent
        .post(&format!("{base}/ui/login"))
        .header("Cookie", cookie)
        .content_type("application/x-www-form-urlencoded")
        .send(format!("name=alice&token={OPERATOR_TOKEN}&csrf={csrf}"))
        .unwrap();
    assert_eq!(response.status(), 303);
    let session = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("tg_session="))
        .expect("a session cookie");
    for flag in ["Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(session.contains(flag), "{flag} missing: {session}");
    }
}

fn identity() -> Identity {
    Identity { subscriber_id: "tls-router".into(), zone: "az-a".into(), kind: "test".into() }
}

#[test]
fn the_router_watches_over_tls_with_the_ca_and_refuses_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let server = start_tls_server(dir.path(), &pki);
    let base = server.url.clone();
    // A token: registering as a subscriber and acknowledging are writes.
    let options = RouterOptions {
        ca_file: Some(pki.ca.clone()),
        token: Some(OPERATOR_TOKEN.into()),
        ..Default::default()
    };
    let router = Router::connect(&base, identity(), options).unwrap();
    assert!(router.wait_for_version(1, Duration::from_secs(10)), "{}", router.status());
    // A change reaches it through the TLS stream, and it acknowledges it over TLS.
    let agent = tls::agent(&base, Duration::from_secs(5), Some(&pki.ca)).unwrap();
    let status = agent
        .put(&format!("{base}/v1/dial"))
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .send_json(json!({"blue_percent": 30, "expected_version": 1, "reason": "tls test"}))
        .unwrap()
        .status();
    assert_eq!(status, 200);
    assert!(router.wait_for_version(2, Duration::from_secs(10)), "{}", router.status());
    assert!(wait_until(Duration::from_secs(10), || router.acked_version() == 2));
    assert!(router.status().connected);
    // Dropping it is prompt even though the TLS reader is blocked in a read.
    let started = std::time::Instant::now();
    drop(router);
    assert!(started.elapsed() < Duration::from_secs(2), "drop took {:?}", started.elapsed());

    // Trusting another CA: no table, and the status says why.
    let options = RouterOptions { ca_file: Some(other_ca(dir.path())), ..Default::default() };
    let stranger = Router::connect(&base, identity(), options).unwrap();
    assert!(!stranger.wait_for_version(1, Duration::from_secs(2)));
    let error = stranger.status().last_error.unwrap_or_default();
    assert!(error.contains("UnknownIssuer") || error.contains("certificate"), "{error}");
    // A CA file that does not exist fails at once.
    let options =
        RouterOptions { ca_file: Some(dir.path().join("missing.pem")), ..Default::default() };
    let err = Router::connect(&base, identity(), options).err().expect("refused");
    assert!(err.to_string().contains("missing.pem"), "{err}");
}

#[test]
fn lane_membership_calls_speak_tls() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let server = start_tls_server(dir.path(), &pki);
    // Membership is a write: it needs a token.
    let token = Some(OPERATOR_TOKEN.to_owned());
    let client =
        LaneClient::with_ca_file(&server.url, token, Duration::from_secs(5), Some(&pki.ca));
    let assigned = client.register("billing", None, "az-a", "orders", 8).unwrap();
    assert!(!assigned.member_id.is_empty());
    let stranger = LaneClient::with_ca_file(
        &server.url,
        None,
        Duration::from_secs(5),
        Some(&other_ca(dir.path())),
    );
    match stranger.register("billing", None, "az-a", "orders", 8) {
        Err(LaneClientError::Unreachable { reason, .. }) => {
            assert!(reason.contains("UnknownIssuer") || reason.contains("certificate"), "{reason}")
        }
        other => panic!("expected a refused connection, got {other:?}"),
    }
}

fn cli(args: &[&str], env: &[(&str, &Path)]) -> (bool, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tidegate"));
    command.args(args).env_remove("TIDEGATE_CA_FILE");
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn the_cli_speaks_https_with_a_ca_file_from_the_flag_the_environment_or_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let server = start_tls_server(dir.path(), &pki);
    let base = server.url.as_str();
    let ca = pki.ca.to_str().unwrap();
    let (ok, out) = cli(&["dial", "get", "--server", base, "--ca-file", ca], &[]);
    assert!(ok, "{out}");
    assert!(out.contains("50"), "{out}");
    let (ok, out) = cli(&["dial", "get", "--server", base], &[("TIDEGATE_CA_FILE", &pki.ca)]);
    assert!(ok, "{out}");
    // Without a CA the system's roots do not know the test CA: refused.
    let (ok, out) = cli(&["dial", "get", "--server", base], &[]);
    assert!(!ok, "{out}");
    assert!(out.contains("UnknownIssuer") || out.contains("certificate"), "{out}");
    // From a config file: the server's [server.tls] makes the URL https://, [client] ca_file
    // names the CA.
    let port = server.port();
    let config_file = dir.path().join("client.toml");
    std::fs::write(
        &config_file,
        format!(
            "[server]\nport = {port}\n[server.tls]\ncerts = \"{}\"\nkey = \"{}\"\n[client]\nca_file = \"{ca}\"\n",
            pki.certs.display(),
            pki.key.display()
        ),
    )
    .unwrap();
    let (ok, out) = cli(&["dial", "get", "--config", config_file.to_str().unwrap()], &[]);
    assert!(ok, "{out}");
}

#[test]
fn tls_configuration_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, key) in [
        (
            "[server.tls]\ncerts = \"/nonexistent/c.pem\"\nkey = \"/nonexistent/k.pem\"\n",
            "server.tls.certs",
        ),
        ("[client]\nca_file = \"/nonexistent/ca.pem\"\n", "client.ca_file"),
        ("[server.tls]\ncerts = \"/etc/hostname\"\n", "key"),
        ("[server.tls]\ncerts = \"/etc/hostname\"\nkey = \"/etc/hostname\"\n", "server.tls.certs"),
        (
            "[edge.tls]\ncerts = \"/nonexistent/c.pem\"\nkey = \"/nonexistent/k.pem\"\n",
            "edge.tls.certs",
        ),
    ] {
        let config_file = dir.path().join("bad.toml");
        std::fs::write(&config_file, toml).unwrap();
        let err = tidegate::config::Config::load(Some(&config_file), &Default::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{toml}: {err}");
    }
    // A certificate where the key should be.
    let pki = make_pki(dir.path());
    let toml = format!(
        "[server.tls]\ncerts = \"{}\"\nkey = \"{}\"\n",
        pki.certs.display(),
        pki.certs.display()
    );
    let config_file = dir.path().join("swapped.toml");
    std::fs::write(&config_file, toml).unwrap();
    let err = tidegate::config::Config::load(Some(&config_file), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("server.tls.key") && err.contains("private key"), "{err}");
}

/// What one raw HTTP/1.1 exchange over TLS saw: the protocol the server chose by ALPN, the
/// status line, the answer's header names in the order they came (but those whose order is
/// random), and the body.
struct Raw {
    alpn: Option<Vec<u8>>,
    status: String,
    names: Vec<String>,
    body: String,
}

/// A rustls client trusting `ca` that offers `alpn`, connected to `base` (`https://host:port`).
fn tls_stream(
    base: &str,
    ca: &Path,
    alpn: &[&[u8]],
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    let mut config = (*tls::client_config(Some(ca)).unwrap()).clone();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let socket = std::net::TcpStream::connect(base.trim_start_matches("https://")).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let name = "localhost".try_into().unwrap();
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    rustls::StreamOwned::new(conn, socket)
}

/// `GET path` over HTTP/1.1 on a fresh TLS connection, read to its close.
fn raw_get(base: &str, ca: &Path, path: &str) -> Raw {
    use std::io::{Read, Write};
    let mut stream = tls_stream(base, ca, &[b"http/1.1"]);
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    // A peer that closes without close_notify ends the read with an error: what came is whole.
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(seen).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("{path}: {text}"));
    let mut lines = head.lines();
    let status = lines.next().unwrap().to_owned();
    // Rocket's Shield adds its three headers in no fixed order: they tell nothing.
    const UNORDERED: [&str; 4] =
        ["date", "permissions-policy", "x-content-type-options", "x-frame-options"];
    let names = lines
        .map(|l| l.split(':').next().unwrap().to_ascii_lowercase())
        .filter(|n| !UNORDERED.contains(&n.as_str()))
        .collect();
    Raw { alpn: stream.conn.alpn_protocol().map(<[u8]>::to_vec), status, names, body: body.into() }
}

/// `[server.tls]` with the dispatcher (the default): the tag path is served on hyper, the rest
/// (and every HTTP/2 client) by Rocket, with the answers of Rocket alone serving TLS
/// (`fast_path = false`, the only TLS server before). Which server answered shows only in the
/// order of the headers: the control is that Rocket's own answers have the same order on both.
#[test]
fn the_tls_port_serves_the_tag_path_on_the_fast_path_and_the_rest_as_rocket_alone() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let dispatch = start_tls_server(dir.path(), &pki);
    let alone_dir = dir.path().join("alone");
    std::fs::create_dir_all(&alone_dir).unwrap();
    let config_file = alone_dir.join("tidegate.toml");
    let tls = format!(
        "[server]\nfast_path = false\n[server.tls]\ncerts = \"{}\"\nkey = \"{}\"\n",
        pki.certs.display(),
        pki.key.display()
    );
    std::fs::write(&config_file, config_toml(&tls)).unwrap();
    let alone = Server::start(&config_file, &alone_dir.join("data"));

    let tag = "/v1/tag?user_id=u-1";
    for path in [tag, "/v1/tag?user_id=", "/openapi.json", "/healthz", "/v1/nothing-here"] {
        let (fast, rocket) =
            (raw_get(&dispatch.url, &pki.ca, path), raw_get(&alone.url, &pki.ca, path));
        assert_eq!((&fast.status, &fast.body), (&rocket.status, &rocket.body), "{path}");
        let mut sorted = (fast.names.clone(), rocket.names.clone());
        sorted.0.sort();
        sorted.1.sort();
        assert_eq!(sorted.0, sorted.1, "{path}: the same headers");
        assert_eq!(fast.alpn.as_deref(), Some(&b"http/1.1"[..]), "{path}");
        if path.starts_with("/v1/tag") {
            assert_ne!(fast.names, rocket.names, "{path}: served by the fast path, not Rocket");
        } else {
            assert_eq!(fast.names, rocket.names, "{path}: served by Rocket on both");
        }
    }
    // An HTTP/2 client (ALPN h2) is Rocket's, as before: curl negotiates h2 and is answered.
    for server in [&dispatch, &alone] {
        let out = Command::new("curl")
            .args(["-s", "--http2", "--cacert"])
            .arg(&pki.ca)
            .args(["-o", "/dev/null", "-w", "%{http_version} %{http_code}"])
            .arg(format!("{}{tag}", server.url))
            .output()
            .expect("curl is installed (scripts/ci-deps.sh)");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "2 200", "{}", server.url);
    }
}

/// A TLS socket that never finishes its handshake, and one that finishes it and never sends a
/// request, are closed by the connection guard after `header_read_timeout`, as plain ones are.
#[test]
fn idle_tls_sockets_are_closed_after_the_header_read_timeout() {
    use std::io::{ErrorKind, Read};
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let config_file = dir.path().join("tidegate.toml");
    let toml = format!(
        "[server]\nheader_read_timeout = \"1s\"\n[server.tls]\ncerts = \"{}\"\nkey = \"{}\"\n",
        pki.certs.display(),
        pki.key.display()
    );
    std::fs::write(&config_file, config_toml(&toml)).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let started = std::time::Instant::now();
    // No handshake at all.
    let mut silent =
        std::net::TcpStream::connect(server.url.trim_start_matches("https://")).unwrap();
    // A handshake, then nothing.
    let mut shook = tls_stream(&server.url, &pki.ca, &[b"http/1.1"]);
    while shook.conn.is_handshaking() {
        shook.conn.complete_io(&mut shook.sock).unwrap();
    }
    // Still open half-way through the timeout (the control: the read times out, nothing closed).
    silent.set_read_timeout(Some(Duration::from_millis(400))).unwrap();
    shook.sock.set_read_timeout(Some(Duration::from_millis(400))).unwrap();
    let mut buf = [0u8; 64];
    let open = |r: std::io::Result<usize>| matches!(r, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut));
    assert!(open(silent.read(&mut buf)), "closed too early");
    assert!(open(shook.read(&mut buf)), "closed too early");
    // Then closed by the server.
    silent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    shook.sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let closed = |r: std::io::Result<usize>| match r {
        Ok(0) => true,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        Ok(_) => false,
    };
    assert!(closed(silent.read(&mut buf)), "the silent socket stayed open");
    assert!(closed(shook.read(&mut buf)), "the socket after its handshake stayed open");
    let after = started.elapsed();
    assert!(after < Duration::from_secs(4), "closed after {after:?}");
    // The port still serves.
    assert!(raw_get(&server.url, &pki.ca, "/v1/tag?user_id=u-1").status.contains("200"));
    eprintln!("FIGURE idle_tls_sockets closed_after={after:?} header_read_timeout=1s");
}

/// `[edge.tls]`: the edge serves HTTPS on its dispatcher (tags and the gateway check on the
/// fast path) with the answers of the edge on Rocket alone serving the same TLS.
#[test]
fn the_edge_serves_https_on_its_fast_path_as_on_rocket_alone() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let server = start_tls_server(dir.path(), &pki);
    let edge = |name: &str, lines: &str| {
        let file = dir.path().join(format!("{name}.toml"));
        let toml = format!(
            "[edge]\nsubscriber_id = \"{name}\"\nzone = \"az-a\"\n{lines}\n[edge.tls]\ncerts = \"{}\"\nkey = \"{}\"\n[client]\nca_file = \"{}\"\n",
            pki.certs.display(),
            pki.key.display(),
            pki.ca.display()
        );
        std::fs::write(&file, config_toml(&toml)).unwrap();
        common::gateway::Edge::start(
            &file,
            &server.url,
            &dir.path().join(format!("{name}.json")),
            0,
        )
    };
    let fast = edge("edge-fast", "");
    let alone = edge("edge-alone", "fast_path = false");
    for e in [&fast, &alone] {
        assert!(e.url.starts_with("https://127.0.0.1:"), "{}", e.url);
        let agent = tls::agent(&e.url, Duration::from_secs(5), Some(&pki.ca)).unwrap();
        let ready = wait_until(Duration::from_secs(15), || {
            agent.get(&format!("{}/readyz", e.url)).call().is_ok_and(|r| r.status() == 200)
        });
        assert!(ready, "{}", e.stderr());
    }
    for path in ["/v1/tag?user_id=u-1", "/v1/gate?user_id=u-1", "/v1/gate", "/healthz"] {
        let (f, r) = (raw_get(&fast.url, &pki.ca, path), raw_get(&alone.url, &pki.ca, path));
        assert_eq!((&f.status, &f.body), (&r.status, &r.body), "{path}");
        if path == "/healthz" {
            assert_eq!(f.names, r.names, "{path}: Rocket's on both");
        } else {
            assert_ne!(f.names, r.names, "{path}: served by the fast path");
        }
    }
    // Plain HTTP on the TLS edge gets no answer.
    let plain = common::agent().get(&format!("http{}/v1/tag?user_id=u-1", &fast.url[5..])).call();
    assert!(plain.is_err());
}
