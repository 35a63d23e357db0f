//! Lane member identities: globally unique member IDs and the per-member secret that proves a
//! heartbeat or a leave comes from the consumer that registered.
//!
//! Designed for several coordinator replicas (docs/src/internals.md, "Member identity"): a member
//! ID carries 64 random bits, so replicas never hand out the same ID without talking to each
//! other, and an ID is never reused after a restart. The secret is
//! `HMAC-SHA256(key, group, member ID)`, so any replica holding the same key verifies it without
//! shared memory. The key is configured (`lanes.member_key`, the same on every replica) or, on a
//! single node, generated once and kept in `<data_dir>/lane-member.key`.

use std::io::Write;
use std::path::Path;

use subtle::ConstantTimeEq;

/// The header heartbeats and leaves present the member secret in.
pub const SECRET_HEADER: &str = "X-Tidegate-Member-Secret";

/// The file the generated key is kept in, under the data directory.
pub const KEY_FILE: &str = "lane-member.key";

/// Longest caller-chosen name in front of the random part (the whole ID stays within 64).
pub const MAX_NAME: usize = 47;

/// The key member secrets are derived with, and during a rotation the key it replaces.
#[derive(Clone)]
pub struct MemberKey {
    key: [u8; 32],
    /// `lanes.previous_member_key`: verifies secrets made before the rotation, never signs.
    previous: Option<[u8; 32]>,
}

/// Which key a presented secret was made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verified {
    /// The current key.
    Current,
    /// The key being rotated out: accepted, and the member should take its new secret.
    Previous,
    /// Neither: not this member's secret.
    No,
}

impl std::fmt::Debug for MemberKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemberKey(redacted)")
    }
}

use crate::client::signature::hmac_sha256;

impl MemberKey {
    pub fn new(key: [u8; 32]) -> MemberKey {
        MemberKey { key, previous: None }
    }

    /// This key, also accepting secrets made with `previous` (a rotation in progress).
    pub fn rotating_from(self, previous: [u8; 32]) -> MemberKey {
        MemberKey { previous: Some(previous), ..self }
    }

    /// The key kept in `data_dir`, created (random, mode 0600) if there is none yet.
    pub fn load_or_create(data_dir: &Path) -> std::io::Result<MemberKey> {
        let path = data_dir.join(KEY_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let mut key = [0u8; 32];
                hex::decode_to_slice(text.trim(), &mut key).map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{} must hold 64 hex digits", path.display()),
                    )
                })?;
                Ok(MemberKey::new(key))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(data_dir)?;
                let key: [u8; 32] = rand::random();
                let tmp = data_dir.join(format!("{KEY_FILE}.tmp"));
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create(true).truncate(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let mut file = options.open(&tmp)?;
                file.write_all(hex::encode(key).as_bytes())?;
                file.sync_all()?;
                std::fs::rename(&tmp, &path)?;
                Ok(MemberKey::new(key))
            }
            Err(e) => Err(e),
        }
    }

    /// The secret of `member` in `group`, as 64 hex digits.
    pub fn secret(&self, group: &str, member: &str) -> String {
        hex::encode(mac(&self.key, group, member))
    }

    /// Whether `presented` is the secret of `member` in `group` (constant time).
    pub fn verify(&self, group: &str, member: &str, presented: &str) -> bool {
        self.verify_which(group, member, presented) != Verified::No
    }

    /// Which key made `presented`, the secret of `member` in `group` (constant time per key).
    pub fn verify_which(&self, group: &str, member: &str, presented: &str) -> Verified {
        let mut given = [0u8; 32];
        if hex::decode_to_slice(presented.trim(), &mut given).is_err() {
            return Verified::No;
        }
        if bool::from(mac(&self.key, group, member).ct_eq(&given)) {
            return Verified::Current;
        }
        match &self.previous {
            Some(previous) if bool::from(mac(previous, group, member).ct_eq(&given)) => {
                Verified::Previous
            }
            _ => Verified::No,
        }
    }
}

fn mac(key: &[u8; 32], group: &str, member: &str) -> [u8; 32] {
    // Group and member names never contain a newline, so the framing is unambiguous.
    let message = format!("tidegate lane member v1\n{group}\n{member}");
    hmac_sha256(key, message.as_bytes())
}

/// A fresh member ID: `name` (or the zone) and 64 random bits, so no two registrations, on any
/// replica or after any restart, get the same ID.
pub fn new_member_id(name: &str) -> String {
    format!("{name}-{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_test_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn hmac_matches_rfc_4231_test_case_6_long_key() {
        let key = [0xaau8; 131];
        let mac = hmac_sha256(&key, b"Test Using Larger Than Block-Size Key - Hash Key First");
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_secret_verifies_only_for_its_member_and_group_and_key() {
        let key = MemberKey::new([7; 32]);
        let secret = key.secret("orders", "az-a-00000000000000aa");
        assert!(key.verify("orders", "az-a-00000000000000aa", &secret));
        assert!(MemberKey::new([7; 32]).verify("orders", "az-a-00000000000000aa", &secret));
        assert!(!key.verify("orders", "az-a-00000000000000ab", &secret));
        assert!(!key.verify("billing", "az-a-00000000000000aa", &secret));
        assert!(!MemberKey::new([8; 32]).verify("orders", "az-a-00000000000000aa", &secret));
        assert!(!key.verify("orders", "az-a-00000000000000aa", "not hex"));
        assert!(!key.verify("orders", "az-a-00000000000000aa", ""));
    }

    #[test]
    fn during_a_rotation_both_keys_verify_and_only_the_new_one_signs() {
        let old = MemberKey::new([7; 32]);
        let old_secret = old.secret("orders", "m-1");
        let rotating = MemberKey::new([9; 32]).rotating_from([7; 32]);
        assert_eq!(rotating.verify_which("orders", "m-1", &old_secret), Verified::Previous);
        let new_secret = rotating.secret("orders", "m-1");
        assert_ne!(new_secret, old_secret);
        assert_eq!(rotating.verify_which("orders", "m-1", &new_secret), Verified::Current);
        assert_eq!(rotating.verify_which("orders", "m-2", &old_secret), Verified::No);
        // After the rotation the old secret is refused.
        assert!(!MemberKey::new([9; 32]).verify("orders", "m-1", &old_secret));
    }

    #[test]
    fn member_ids_do_not_repeat() {
        let ids: std::collections::BTreeSet<String> =
            (0..10_000).map(|_| new_member_id("az-a")).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|id| id.len() == "az-a-".len() + 16));
    }

    #[test]
    fn the_generated_key_is_kept_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let first = MemberKey::load_or_create(dir.path()).unwrap();
        let again = MemberKey::load_or_create(dir.path()).unwrap();
        assert_eq!(first.secret("g", "m"), again.secret("g", "m"));
        let other = tempfile::tempdir().unwrap();
        let elsewhere = MemberKey::load_or_create(other.path()).unwrap();
        assert_ne!(first.secret("g", "m"), elsewhere.secret("g", "m"));
    }
}
