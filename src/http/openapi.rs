//! `GET /v1/openapi.json`: the API contract, a checked-in OpenAPI 3.1 document served as is.
//!
//! The document is `src/http/openapi.json`. `tests/openapi.rs` fails when a mounted API route is
//! missing from it (or it names one that is not mounted) and validates real answers against its
//! schemas; `scripts/schemathesis.sh` checks the running binary against it.

use rocket::fairing::AdHoc;
use rocket::http::ContentType;
use rocket::{get, routes};

/// The OpenAPI 3.1 description of every `/v1` operation, `/healthz`, `/readyz` and `/metrics`.
pub const DOCUMENT: &str = include_str!("openapi.json");

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("openapi", |rocket| async { rocket.mount("/", routes![openapi]) })
}

/// Anyone may read the contract, even where reads need a token: it holds no state.
#[get("/v1/openapi.json")]
fn openapi() -> (ContentType, &'static str) {
    (ContentType::JSON, DOCUMENT)
}
