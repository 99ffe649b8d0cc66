//! The secret every replica of one deployment shares, and the MACs made with it.
//!
//! Whoever can write to Redis can push anything onto a node's inbox or rewrite a run record; the
//! secret is what tells a replica's own messages and records from such writes. Each MAC is
//! HMAC-SHA256 over a domain name and the parts, each length-prefixed, so no two different
//! sequences of parts (or domains) encode to the same input.

use std::fmt;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::{ClusterConfigError, ClusterError};

type HmacSha256 = Hmac<Sha256>;

/// The length of a MAC in bytes.
pub(crate) const MAC_LEN: usize = 32;

/// The shared cluster secret (at least [`ClusterSecret::MIN_LEN`] bytes). Cheap to clone; its
/// `Debug` never shows it.
#[derive(Clone)]
pub struct ClusterSecret(Arc<[u8]>);

impl ClusterSecret {
    /// The fewest bytes a secret may have: 256 bits, the HMAC-SHA256 key size.
    pub const MIN_LEN: usize = 32;

    /// The secret from its bytes; [`ClusterError::Config`] when shorter than [`Self::MIN_LEN`].
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Self, ClusterError> {
        let bytes = bytes.as_ref();
        if bytes.len() < Self::MIN_LEN {
            return Err(ClusterConfigError::SecretTooShort { len: bytes.len() }.into());
        }
        Ok(Self(Arc::from(bytes)))
    }

    /// HMAC-SHA256 of `domain` and `parts`, each length-prefixed.
    pub(crate) fn mac(&self, domain: &str, parts: &[&[u8]]) -> [u8; MAC_LEN] {
        self.keyed(domain, parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is the MAC of `domain` and `parts` (compared in constant time).
    pub(crate) fn verify(&self, domain: &str, parts: &[&[u8]], tag: &[u8]) -> bool {
        self.keyed(domain, parts).verify_slice(tag).is_ok()
    }

    fn keyed(&self, domain: &str, parts: &[&[u8]]) -> HmacSha256 {
        // HMAC takes keys of any length.
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC accepts any key length");
        for part in std::iter::once(domain.as_bytes()).chain(parts.iter().copied()) {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(***)")
    }
}

// Settings are compared on reload; the comparison is not reachable by a peer.
impl PartialEq for ClusterSecret {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for ClusterSecret {}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(fill: u8) -> ClusterSecret {
        ClusterSecret::new([fill; 32]).unwrap()
    }

    #[test]
    fn short_secrets_are_refused_and_debug_hides_the_bytes() {
        assert!(matches!(ClusterSecret::new(b"too short"), Err(ClusterError::Config(_))));
        assert!(ClusterSecret::new([b'x'; 31]).is_err());
        let s = ClusterSecret::new("a-secret-of-exactly-32-bytes-ok!").unwrap();
        assert_eq!(format!("{s:?}"), "ClusterSecret(***)");
    }

    #[test]
    fn macs_bind_the_key_the_domain_and_the_part_boundaries() {
        let tag = secret(1).mac("d", &[b"ab", b"c"]);
        assert!(secret(1).verify("d", &[b"ab", b"c"], &tag));
        assert!(!secret(2).verify("d", &[b"ab", b"c"], &tag), "another key");
        assert!(!secret(1).verify("e", &[b"ab", b"c"], &tag), "another domain");
        assert!(!secret(1).verify("d", &[b"a", b"bc"], &tag), "the same bytes split differently");
        assert!(!secret(1).verify("d", &[b"ab", b"c"], &tag[..31]), "a truncated tag");
    }
}
