//! Where the current routing table comes from: the coordinator in-process, or a client's copy.
//!
//! Producers and tagging helpers only need "the table right now"; this trait lets the same code
//! run inside the coordinator (the demo) and inside a service that watches one remotely.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::core::RoutingTable;
use crate::service::coordinator::Coordinator;

/// A source of the current routing table. Reads must be cheap and lock-free: they sit on hot
/// paths (every tagged request, every produced message).
pub trait TableSource: Send + Sync {
    /// The current table, or `None` while none has arrived yet (a client that has not reached
    /// the coordinator and has no disk cache).
    fn current_table(&self) -> Option<Arc<RoutingTable>>;
}

impl TableSource for Coordinator {
    fn current_table(&self) -> Option<Arc<RoutingTable>> {
        Some(self.table())
    }
}

impl TableSource for ArcSwap<RoutingTable> {
    fn current_table(&self) -> Option<Arc<RoutingTable>> {
        Some(self.load_full())
    }
}

impl TableSource for crate::client::Router {
    /// The current table; `None` until the first table arrives (see `wait_for_version`).
    fn current_table(&self) -> Option<Arc<RoutingTable>> {
        self.table()
    }
}

impl<T: TableSource + ?Sized> TableSource for Arc<T> {
    fn current_table(&self) -> Option<Arc<RoutingTable>> {
        (**self).current_table()
    }
}
