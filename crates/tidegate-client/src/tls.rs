//! TLS for every client of tidegate (the `Router`'s watch and acks, the lane membership calls,
//! the CLI): rustls with the ring provider, the stack Rocket serves HTTPS with.
//!
//! Certificates are verified against the system's roots (`rustls-native-certs`: the platform
//! store, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), or, when a CA file is configured, against the
//! certificates in that PEM file only (a private CA for the coordinators). There is no switch to
//! turn verification off.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The environment variable naming a CA file, read by the `Router`, the lane client and the CLI.
pub const CA_FILE_ENV: &str = "TIDEGATE_CA_FILE";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the CA file {path}: {reason}")]
    CaFile { path: String, reason: String },
    #[error("the CA file {0} holds no PEM certificate")]
    EmptyCaFile(String),
    #[error("no system root certificates could be loaded ({0}); name a CA file")]
    NoSystemRoots(String),
    #[error("TLS set-up failed: {0}")]
    Setup(String),
}

/// The CA file from [`CA_FILE_ENV`], when it is set and not empty.
pub fn ca_file_from_env() -> Option<PathBuf> {
    std::env::var_os(CA_FILE_ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Whether `url` asks for TLS.
pub fn is_https(url: &str) -> bool {
    url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

/// The trusted roots: the certificates in `ca_file`, or the system's.
pub fn roots(ca_file: Option<&Path>) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    if let Some(path) = ca_file {
        let shown = path.display().to_string();
        let failed = |e: &dyn std::fmt::Display| TlsError::CaFile {
            path: shown.clone(),
            reason: e.to_string(),
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| failed(&e))?
            .collect::<Result<_, _>>()
            .map_err(|e| failed(&e))?;
        if certs.is_empty() {
            return Err(TlsError::EmptyCaFile(shown));
        }
        return Ok(certs);
    }
    let loaded = rustls_native_certs::load_native_certs();
    if loaded.certs.is_empty() {
        let why: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
        return Err(TlsError::NoSystemRoots(if why.is_empty() {
            "the store is empty".into()
        } else {
            why.join("; ")
        }));
    }
    Ok(loaded.certs)
}

/// A rustls client configuration that trusts [`roots`].
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, TlsError> {
    let mut store = rustls::RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(roots(ca_file)?);
    if added == 0 {
        return Err(TlsError::Setup("none of the root certificates could be parsed".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A blocking HTTP agent (ureq) that answers with the status instead of failing on 4xx/5xx, gives
/// up after `timeout`, and, for `https://` bases, verifies the server against [`roots`].
pub fn agent(
    base: &str,
    timeout: Duration,
    ca_file: Option<&Path>,
) -> Result<ureq::Agent, TlsError> {
    let mut config =
        ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(timeout));
    if is_https(base) {
        let certs: Vec<ureq::tls::Certificate<'static>> = roots(ca_file)?
            .iter()
            .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
            .collect();
        let tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .root_certs(ureq::tls::RootCerts::new_with_certs(&certs))
            .build();
        config = config.tls_config(tls);
    }
    Ok(config.build().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_ca_file_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = roots(Some(&missing)).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        assert_eq!(
            roots(Some(&empty)).unwrap_err(),
            TlsError::EmptyCaFile(empty.display().to_string())
        );
    }

    #[test]
    fn https_is_recognised_in_any_case() {
        assert!(is_https("https://a:1") && is_https("HTTPS://a") && !is_https("http://a"));
    }
}
