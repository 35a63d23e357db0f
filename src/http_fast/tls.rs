//! HTTPS on a dispatcher (`[server.tls]` on the main port, `[edge.tls]` on the edge): the
//! dispatcher terminates TLS itself, reads the first request head from the decrypted stream,
//! and serves the fast path or hands the decrypted connection to Rocket, which then serves it as
//! plain HTTP while still marking its cookies `Secure` (its configuration keeps the `tls` table).
//!
//! The TLS settings are Rocket's own (`rocket_http::tls::TlsListener`, the same rustls and
//! tokio-rustls): ring's cipher suites, TLS 1.2 and 1.3, no client certificates, a session
//! cache of 1 024, session tickets, and ALPN `h2` then `http/1.1`. A client that negotiates `h2`
//! is handed to Rocket whole (the fast path speaks HTTP/1.1), so HTTP/2 clients get what they
//! got before; HTTP/1.1 clients get the fast path.
//!
//! A handshake that never completes is closed by the connection guard, as a head that never
//! completes is: the connection is unproven until its first request head is parsed.
//!
//! Architecture invariant: like the rest of `http_fast`, this module knows hyper, tokio and
//! rustls, never Rocket.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

/// A TLS connection accepted by a dispatcher.
pub type TlsConn = tokio_rustls::server::TlsStream<TcpStream>;

/// The acceptor for `certs` (a PEM chain) and `key`; `section` names the table in errors
/// (`server.tls`, `edge.tls`). The configuration checked both files already; this fails only if
/// they changed since, or rustls refuses the pair (a key that is not the certificate's).
pub fn acceptor(certs: &Path, key: &Path, section: &str) -> Result<TlsAcceptor, String> {
    use rustls::crypto::ring;
    let chain = CertificateDer::pem_file_iter(certs)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{section}.certs: {}: {e}", certs.display()))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("{section}.key: {}: {e}", key.display()))?;
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("{section}: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| format!("{section}: the key does not go with the certificate: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(1024);
    config.ticketer = ring::Ticketer::new().map_err(|e| format!("{section}: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Whether the client chose HTTP/2 by ALPN.
pub fn negotiated_h2(conn: &TlsConn) -> bool {
    conn.get_ref().1.alpn_protocol() == Some(b"h2")
}

/// Reads from `conn` into `head` until `complete` says the bytes read hold a whole request head
/// (`Some(answer)`), or `limit` bytes are read without one, or the client closes (`None`, with
/// `head` as read). Unlike a plain socket a TLS stream cannot be peeked, so what is read is
/// kept and read again through [`Rewound`].
pub async fn read_head<T>(
    conn: &mut TlsConn,
    head: &mut Vec<u8>,
    limit: usize,
    mut complete: impl FnMut(&[u8]) -> Option<T>,
) -> io::Result<Option<T>> {
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&chunk[..n]);
        if let Some(answer) = complete(head) {
            return Ok(Some(answer));
        }
        if head.len() >= limit {
            return Ok(None);
        }
    }
}

/// A stream whose first bytes were read already: they are read again first, then the stream's.
pub struct Rewound<S> {
    prefix: Bytes,
    inner: S,
}

impl<S> Rewound<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Rewound<S> {
        Rewound { prefix: Bytes::from(prefix), inner }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewound<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewound<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::Rewound;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_rewound_stream_reads_its_prefix_then_the_rest() {
        let rest: &[u8] = b" world";
        let mut stream = Rewound::new(b"hello".to_vec(), rest);
        let mut small = [0u8; 3];
        stream.read_exact(&mut small).await.unwrap();
        assert_eq!(&small, b"hel");
        let mut all = Vec::new();
        stream.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"lo world");
    }
}
