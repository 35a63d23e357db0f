//! Where the current routing table comes from: the coordinator in-process, or a client's copy.
//!
//! The trait is the client crate's ([`crate::client::TableSource`], so the lane producer of
//! `tidegate-client`'s `kafka` feature and a service's `Router` share it); the server adds the
//! coordinator as a source. Re-exported here so `service::table_source::TableSource` keeps its
//! path.

use std::sync::Arc;

pub use crate::client::TableSource;
use crate::core::RoutingTable;
use crate::service::coordinator::Coordinator;

impl TableSource for Coordinator {
    fn current_table(&self) -> Option<Arc<RoutingTable>> {
        Some(self.table())
    }
}
