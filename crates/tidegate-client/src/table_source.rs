//! Where the current routing table comes from: a watched [`Router`](crate::router::Router), a table
//! holder of the caller's (an `ArcSwap`), or, in the server, the coordinator in-process.
//!
//! Producers and tagging helpers only need "the table right now"; this trait lets the same code
//! (the lane producer of the `kafka` feature, for one) run inside the coordinator and inside a
//! service that watches one remotely. The server implements it for its `Coordinator`.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tidegate_core::RoutingTable;

/// A source of the current routing table. Reads must be cheap and lock-free: they sit on hot
/// paths (every tagged request, every produced message).
pub trait TableSource: Send + Sync {
    /// The current table, or `None` while none has arrived yet (a client that has not reached
    /// the coordinator and has no disk cache).
    fn current_table(&self) -> Option<Arc<RoutingTable>>;
}

impl TableSource for ArcSwap<RoutingTable> {
    fn current_table(&self) -> Option<Arc<RoutingTable>> {
        Some(self.load_full())
    }
}

impl TableSource for crate::router::Router {
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
