//! Rocket behind the dispatcher (`http_fast::dispatch`): the listener Rocket serves is the
//! stream of connections the dispatcher hands it, through `launch_on` of the patched Rocket
//! (vendor/rocket/TIDEGATE-PATCH.md).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use rocket::http::private::{Connection, Listener};
use rocket::tokio::sync::mpsc;

use rocket::{Build, Rocket};

use super::launch_error;
use crate::http_fast::dispatch::{Handed, Handoff};

/// The connections the dispatcher hands to Rocket; `local_addr` is the public port's.
pub struct HandedListener {
    handed: mpsc::UnboundedReceiver<Handed>,
    local: SocketAddr,
}

/// The handoff for a dispatcher, and what Rocket reads it from once the dispatcher is bound.
pub fn handoff() -> (Handoff, Unbound) {
    let (handoff, handed) = mpsc::unbounded_channel();
    (handoff, Unbound(handed))
}

/// The far end of a handoff, before the public port is known.
pub struct Unbound(mpsc::UnboundedReceiver<Handed>);

impl Unbound {
    /// The listener for the dispatcher bound at `local`.
    pub fn at(self, local: SocketAddr) -> HandedListener {
        HandedListener { handed: self.0, local }
    }
}

impl Listener for HandedListener {
    type Connection = Handed;

    fn local_addr(&self) -> Option<SocketAddr> {
        Some(self.local)
    }

    fn poll_accept(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<Handed>> {
        match self.handed.poll_recv(cx) {
            Poll::Ready(Some(handed)) => Poll::Ready(Ok(handed)),
            // The dispatcher is gone: an error stops Rocket, which is what should happen.
            Poll::Ready(None) => Poll::Ready(Err(io::Error::other("the dispatcher stopped"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Connection for Handed {
    fn peer_address(&self) -> Option<SocketAddr> {
        self.peer()
    }

    fn enable_nodelay(&self) -> io::Result<()> {
        self.set_nodelay()
    }
}

/// Serves `rocket` through `listener` on Rocket's runtime until Ctrl-C or SIGTERM, with the
/// dispatcher (and any other listener in `alongside`) spawned on the same runtime first.
/// `section` names the port's configuration section in errors (`server`, `edge`).
pub fn launch(
    rocket: Rocket<Build>,
    listener: HandedListener,
    alongside: Vec<Pin<Box<dyn Future<Output = ()> + Send>>>,
    section: &str,
) -> Result<(), String> {
    let at = listener.local.to_string();
    super::Runtime::of(&rocket)
        .run(async move {
            for task in alongside {
                rocket::tokio::spawn(task);
            }
            rocket.launch_on(listener).await
        })
        .map(|_| ())
        .map_err(|e| launch_error(e, section, &at))
}
