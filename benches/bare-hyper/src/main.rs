//! A bare hyper server for benchmark ratios: `bare-hyper PORT BODY_BYTES [SPIN_NS]`.
//!
//! Every request gets `200 OK`, `content-type: application/json` and the same constant body of
//! `BODY_BYTES` bytes, on the same tokio multi-thread runtime tidegate uses. It is the "bare HTTP"
//! reference that `scripts/bench.sh` measures `GET /v1/tag` against. With `SPIN_NS`, each request
//! first spends that much CPU in a busy loop: the tail rows' control, a server that does nothing
//! else tidegate does but costs as much CPU per request.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let size: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(120);
    let spin = std::time::Duration::from_nanos(args.get(3).and_then(|s| s.parse().ok()).unwrap_or(0));
    let mut body = vec![b' '; size];
    if size >= 2 {
        body[0] = b'{';
        body[size - 1] = b'}';
    }
    let body = Bytes::from(body);
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await.unwrap();
    println!("bare-hyper listening on http://{}", listener.local_addr().unwrap());
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let body = body.clone();
        tokio::spawn(async move {
            let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                let body = body.clone();
                if !spin.is_zero() {
                    let started = std::time::Instant::now();
                    while started.elapsed() < spin {
                        std::hint::spin_loop();
                    }
                }
                async move {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(body))
                            .unwrap(),
                    )
                }
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
