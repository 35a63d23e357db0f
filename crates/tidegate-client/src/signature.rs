//! Signed tags: the edge's gateway check signs the tag it decided, so a service can tell a tag
//! its gateway set from one a client sent.
//!
//! A propagated `x-tidegate-color` is only as trustworthy as the hop that set it. The shipped
//! nginx config overwrites every client-sent `x-tidegate-*` header, but a gateway that forgets to,
//! or a client that reaches a service directly, could choose its own colour. With `[edge] tag_key`
//! the gate adds `x-tidegate-signature`: HMAC-SHA256 over `tidegate tag v1`, the colour, the
//! version and the user ID, keyed with a secret the edges and the services share, truncated to
//! 128 bits (32 hex digits). [`crate::resolve_signed`] trusts a propagated tag only when its
//! signature checks for that user; anything else is recomputed from the user ID.
//!
//! A tag the gate decided for a service (`x-tidegate-service`, whose release channel may route
//! the user elsewhere than the map) or in a named routing domain is signed over
//! `tidegate tag v2`, the colour, the version, the user ID, the domain (`default` for the default
//! one) and the service (empty for none), so it is trusted only by a check for that domain and
//! service ([`crate::resolve_signed_for`]): the `orders` tag of a user in the `orders` channel
//! cannot be replayed to `billing`, which the channel does not route.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The header the signature travels in.
pub const SIGNATURE_HEADER: &str = "x-tidegate-signature";

/// The shared secret of signed tags (at least 32 bytes; give every edge and service the same).
#[derive(Clone)]
pub struct TagKey(Vec<u8>);

impl std::fmt::Debug for TagKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TagKey(redacted)")
    }
}

/// Why a secret cannot be a tag key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a tag key needs at least 32 bytes (64 hex digits from `openssl rand -hex 32`), got {0}")]
pub struct ShortKey(pub usize);

impl TagKey {
    pub fn new(secret: &[u8]) -> Result<TagKey, ShortKey> {
        if secret.len() < 32 { Err(ShortKey(secret.len())) } else { Ok(TagKey(secret.to_vec())) }
    }

    /// The signature of the lane `lane` at `version` for `user_id`, 32 lowercase hex digits.
    pub fn sign(&self, lane: &str, version: u64, user_id: &str) -> String {
        self.sign_for(lane, version, user_id, None, None)
    }

    /// The signature of a tag decided in `domain` (`None` or `default`: the default domain) for
    /// a call of `service` (`None`: the global rule): the `v1` message without either, else the
    /// `v2` message that binds both.
    pub fn sign_for(
        &self,
        lane: &str,
        version: u64,
        user_id: &str,
        domain: Option<&str>,
        service: Option<&str>,
    ) -> String {
        let domain = domain.filter(|d| !d.is_empty() && *d != tidegate_core::DEFAULT_DOMAIN);
        let service = service.filter(|s| !s.is_empty());
        let message = match (domain, service) {
            (None, None) => format!("tidegate tag v1\n{lane}\n{version}\n{user_id}"),
            (domain, service) => format!(
                "tidegate tag v2\n{lane}\n{version}\n{user_id}\n{}\n{}",
                domain.unwrap_or(tidegate_core::DEFAULT_DOMAIN),
                service.unwrap_or_default()
            ),
        };
        let mac = hmac_sha256(&self.0, message.as_bytes());
        mac[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `signature` is this key's signature of the tag (in constant time).
    pub fn verify(&self, lane: &str, version: u64, user_id: &str, signature: &str) -> bool {
        self.verify_for(lane, version, user_id, None, None, signature)
    }

    /// [`TagKey::verify`] of a tag decided in `domain` for a call of `service`
    /// ([`TagKey::sign_for`]).
    pub fn verify_for(
        &self,
        lane: &str,
        version: u64,
        user_id: &str,
        domain: Option<&str>,
        service: Option<&str>,
        signature: &str,
    ) -> bool {
        let expected = self.sign_for(lane, version, user_id, domain, service);
        let given = signature.trim().to_ascii_lowercase();
        given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
    }
}

/// HMAC-SHA256 (RFC 2104); also what lane member secrets are made with.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_test_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn a_signature_binds_colour_version_and_user() {
        let key = TagKey::new(&[7u8; 32]).unwrap();
        let sig = key.sign("green", 12, "user-42");
        assert_eq!(sig.len(), 32);
        assert!(key.verify("green", 12, "user-42", &sig));
        assert!(key.verify("green", 12, "user-42", &sig.to_uppercase()));
        assert!(!key.verify("blue", 12, "user-42", &sig), "another colour");
        assert!(!key.verify("green", 13, "user-42", &sig), "another version");
        assert!(!key.verify("green", 12, "user-43", &sig), "another user");
        assert!(!key.verify("green", 12, "user-42", "forged"), "garbage");
        let other = TagKey::new(&[8u8; 32]).unwrap();
        assert!(!other.verify("green", 12, "user-42", &sig), "another key");
        assert_eq!(TagKey::new(b"short").unwrap_err(), ShortKey(5));
    }

    /// Vectors computed with Python's `hmac` over the documented messages (clients/go checks the
    /// same ones).
    #[test]
    fn a_signature_for_a_service_or_domain_binds_them_too() {
        let key = TagKey::new(&[7u8; 32]).unwrap();
        assert_eq!(key.sign("green", 12, "user-42"), "840fec3d8b284aa1a80e0072e8003e10");
        assert_eq!(
            key.sign_for("green", 12, "user-42", Some("default"), None),
            "840fec3d8b284aa1a80e0072e8003e10",
            "the default domain without a service is the v1 message"
        );
        let orders = key.sign_for("green", 12, "user-42", None, Some("orders"));
        assert_eq!(orders, "e8c33cc0294eb31db674b9c95a0f4ba9");
        assert_eq!(
            key.sign_for("red", 12, "user-42", Some("search"), None),
            "1c6d2a3c053a213f185eb29fa50fb41c"
        );
        assert_eq!(
            key.sign_for("red", 12, "user-42", Some("search"), Some("ranker")),
            "30fe25b802e3c1ea92c6c2527bbe1d55"
        );
        assert!(key.verify_for("green", 12, "user-42", None, Some("orders"), &orders));
        assert!(!key.verify("green", 12, "user-42", &orders), "not a global-rule tag");
        assert!(
            !key.verify_for("green", 12, "user-42", None, Some("billing"), &orders),
            "not another service's"
        );
        assert!(
            !key.verify_for("green", 12, "user-42", Some("search"), Some("orders"), &orders),
            "not another domain's"
        );
    }
}
