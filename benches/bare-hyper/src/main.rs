//! A bare hyper server for benchmark ratios: `bare-hyper PORT BODY_BYTES`.
//!
//! Every request gets `200 OK`, `content-type: application/json` and the same constant body of
//! `BODY_BYTES` bytes, on the same tokio multi-thread runtime tidegate uses. It is the "bare HTTP"
//! reference that `scripts/bench.sh` measures `GET /v1/tag` against.

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
