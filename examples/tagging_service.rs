//! An example service that embeds `tidegate::client`: local tagging, header propagation, and the
//! ownership check on writes.
//!
//! ```sh
//! cargo run --release -- serve &                          # a coordinator on :8080
//! LOCAL_COLOR=green ZONE=az-a cargo run --example tagging_service
//! curl -i 'http://127.0.0.1:8090/whoami?user_id=alice'    # tagged locally, headers set
//! curl -i -X POST 'http://127.0.0.1:8090/orders?user_id=alice'   # 201 if green owns alice, else 421
//! ```
//!
//! It uses a bare `std::net` HTTP loop so the example shows only the client library.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use tidegate::client::{Identity, Router, RouterOptions, resolve};
use tidegate::core::ZoneId;

fn main() {
    let coordinator =
        std::env::var("TIDEGATE_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let zone = std::env::var("ZONE").unwrap_or_else(|_| "az-a".into());
    let local_lane = std::env::var("LOCAL_COLOR").unwrap_or_else(|_| "green".into());
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:8090".into());
    let router = Arc::new(
        Router::connect(
            &coordinator,
            Identity {
                subscriber_id: format!("example-{zone}-{}", std::process::id()),
                zone,
                kind: "example".into(),
            },
            RouterOptions {
                // A service token lets it register as a subscriber and acknowledge versions;
                // without one it only follows the table.
                token: std::env::var("TIDEGATE_SERVICE_TOKEN").ok(),
                cache_path: Some(std::env::temp_dir().join("tidegate-example-table.json")),
                ..Default::default()
            },
        )
        .expect("a valid coordinator URL"),
    );
    if !router.wait_for_version(1, Duration::from_secs(3)) {
        eprintln!("warning: {}", router.status());
    }
    // The lane names a zone of the table (blue and green are in every table).
    let local: ZoneId = router.zone_of_lane(&local_lane).expect("LOCAL_COLOR names a lane");
    let listener = TcpListener::bind(&listen).expect("bind");
    println!("example service on http://{listen} ({local_lane}), {}", router.status());
    for stream in listener.incoming().flatten() {
        let router = Arc::clone(&router);
        std::thread::spawn(move || handle(stream, &router, local));
    }
}

fn handle(mut stream: TcpStream, router: &Router, local: ZoneId) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    let user_id = target.split_once("user_id=").map(|(_, v)| v.split('&').next().unwrap_or(""));
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());

    let (status, body, forward) = match (method, target.split('?').next().unwrap_or("")) {
        ("GET", "/whoami") => match resolve(router, header, user_id) {
            Ok(resolved) => (
                "200 OK",
                format!("{{\"color\":\"{}\",\"source\":\"{:?}\"}}", resolved.lane, resolved.source),
                resolved.headers(),
            ),
            Err(e) => ("400 Bad Request", format!("{{\"error\":\"{e}\"}}"), Vec::new()),
        },
        ("POST", "/orders") => match user_id.map(|u| router.owns(u, local)) {
            Some(Ok(())) => ("201 Created", "{\"created\":true}".to_owned(), Vec::new()),
            // 421 Misdirected Request: the caller should retry against the owning colour.
            Some(Err(misrouted)) => {
                ("421 Misdirected Request", format!("{{\"error\":\"{misrouted}\"}}"), Vec::new())
            }
            None => {
                ("400 Bad Request", "{\"error\":\"user_id is required\"}".to_owned(), Vec::new())
            }
        },
        _ => ("404 Not Found", "{\"error\":\"not found\"}".to_owned(), Vec::new()),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in forward {
        response.push_str(&format!("{name}: {value}\r\n"));
    }
    response.push_str("Connection: close\r\n\r\n");
    response.push_str(&body);
    let _ = stream.write_all(response.as_bytes());
}
