//! The library services embed: a watched local copy of the routing table, local tagging, tag
//! propagation headers, the ownership check, and the MQ lane membership calls. No Rocket and no
//! async runtime required.
//!
//! With the `kafka` feature, the `kafka` module adds the Kafka lane producer and consumer
//! (rdkafka, run on tokio; still no Rocket). The producer reads routing tables from a
//! [`TableSource`], which a [`Router`] is. Without the feature the crate builds no rdkafka and
//! no async runtime (`tests/tidy.rs` checks both dependency trees).
//!
//! ```no_run
//! use tidegate_client::{Identity, Router, RouterOptions};
//! let router = Router::connect(
//!     "http://127.0.0.1:8080",
//!     Identity { subscriber_id: "orders-7".into(), zone: "az-a".into(), kind: "service".into() },
//!     RouterOptions { cache_path: Some("/var/lib/orders/tidegate.json".into()), ..Default::default() },
//! )
//! .unwrap();
//! let tag = router.tag("user-42").unwrap();
//! println!("{} -> {} in {}", "user-42", tag.lane, tag.zone);
//! ```

#![forbid(unsafe_code)]

mod header_names;
pub mod headers;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod lanes;
pub mod metrics;
mod router;
pub mod signature;
pub mod sse;
mod table_source;
pub mod tls;
pub mod wire;
pub mod write;

pub use headers::{
    COLOR_HEADER, Resolved, Source, VERSION_HEADER, headers_for, resolve, resolve_signed,
    resolve_signed_for,
};
pub use router::{
    ClientError, DEFAULT_STALL_TIMEOUT, Identity, Misrouted, Origin, Router, RouterOptions,
    RouterStatus, TableHook, Tag, WriteScope, first_choice,
};
pub use signature::{SIGNATURE_HEADER, TagKey};
pub use table_source::TableSource;
pub use tidegate_core::{WRITE_RETRY_AFTER_MS, WriteCheck};
pub use wire::{DecodeError, decode_table};
pub use write::{HOP_HEADER, WriteAnswer, WriteRoute, forward_once};
