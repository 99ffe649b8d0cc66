//! What travels through an inbox and back, signed with the cluster secret.
//!
//! Wire form of a request: `agw1.<hex HMAC>.<JSON envelope>`; the MAC is computed over the
//! JSON's exact bytes and checked before they are parsed, so every field (sender, target, run,
//! kind, payload, principal, issue time, deadline, nonce, reply key) is covered without a
//! canonical re-encoding. A reply has the same form, its MAC bound to the request's nonce, so a
//! reply cannot be forged or moved to another request either.

use serde::{Deserialize, Serialize};

use crate::secret::{ClusterSecret, MAC_LEN};
use crate::{ControlReply, ControlRequest};

/// The version tag every signed message starts with.
const TAG: &str = "agw1";
/// MAC domains: a request MAC never verifies as a reply MAC or a record MAC.
const REQUEST_DOMAIN: &str = "agw-cluster control request";
const REPLY_DOMAIN: &str = "agw-cluster control reply";
/// How far the clocks of two replicas may disagree.
pub(crate) const CLOCK_SKEW_MS: u64 = 2_000;

/// A control request as the inbox carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Envelope {
    /// The sending node.
    pub(crate) from: String,
    /// The node it is addressed to; any other node refuses it.
    pub(crate) to: String,
    /// The list the reply goes to.
    pub(crate) reply_to: String,
    /// Unique per request (a UUID): seen twice, it is a replay.
    pub(crate) nonce: String,
    /// Unix milliseconds when it was sent.
    pub(crate) issued_ms: u64,
    /// Unix milliseconds after which it is refused (the sender no longer waits).
    pub(crate) deadline_ms: u64,
    pub(crate) request: ControlRequest,
}

/// Why a control request (or reply) was refused. Logged; the sender gets no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// Not `agw1.<mac>.<json>` at all (e.g. a raw JSON envelope pushed by hand).
    #[error("unsigned or malformed")]
    Unsigned,
    /// The MAC does not verify: forged, altered after signing, or signed with another secret.
    #[error("its MAC does not verify (forged, altered, or signed with another cluster secret)")]
    Forged,
    /// The MAC verifies but the JSON does not decode (a replica of another agw version).
    #[error("signed but undecodable: {0}")]
    Undecodable(String),
    /// Addressed to another node (copied from that node's inbox).
    #[error("addressed to node {0:?}, not this one")]
    Misdirected(String),
    /// Past its deadline.
    #[error("past its deadline by {0} ms")]
    Expired(u64),
    /// Issued in the future, or valid for longer than the control deadline allows.
    #[error("valid beyond the control deadline (or issued in the future): clock skew between replicas?")]
    OutOfWindow,
    /// Its nonce was seen before.
    #[error("replayed: its nonce was seen before")]
    Replayed,
    /// More requests within their deadline than the replay cache holds.
    #[error("too many requests within their deadline to remember them all")]
    ReplayCacheFull,
}

/// The signed wire form of `envelope`.
pub(crate) fn seal(secret: &ClusterSecret, envelope: &Envelope) -> Result<String, serde_json::Error> {
    let json = serde_json::to_string(envelope)?;
    Ok(format!("{TAG}.{}.{json}", hex::encode(secret.mac(REQUEST_DOMAIN, &[json.as_bytes()]))))
}

/// Checks a request's MAC (before parsing anything) and decodes it. What it says is then
/// trustworthy, but not yet acceptable: see [`Envelope::check`].
pub(crate) fn verify(secret: &ClusterSecret, wire: &str) -> Result<Envelope, Refusal> {
    let (tag, json) = split(wire)?;
    if !secret.verify(REQUEST_DOMAIN, &[json.as_bytes()], &tag) {
        return Err(Refusal::Forged);
    }
    serde_json::from_str(json).map_err(|e| Refusal::Undecodable(e.to_string()))
}

impl Envelope {
    /// Whether `node_id` may act on this request at `now_ms`: addressed to it, not past its
    /// deadline, and not valid for longer than `max_ttl_ms` (plus clock skew), which bounds how
    /// long its nonce must be remembered. The nonce is left to [`crate::replay::ReplayCache`].
    pub(crate) fn check(&self, node_id: &str, now_ms: u64, max_ttl_ms: u64) -> Result<(), Refusal> {
        if self.to != node_id {
            return Err(Refusal::Misdirected(self.to.clone()));
        }
        if now_ms > self.deadline_ms {
            return Err(Refusal::Expired(now_ms - self.deadline_ms));
        }
        let latest = now_ms.saturating_add(max_ttl_ms).saturating_add(CLOCK_SKEW_MS);
        if self.deadline_ms > latest || self.issued_ms > now_ms.saturating_add(CLOCK_SKEW_MS) {
            return Err(Refusal::OutOfWindow);
        }
        Ok(())
    }
}

/// The signed wire form of the reply to the request with `nonce`.
pub(crate) fn seal_reply(
    secret: &ClusterSecret,
    nonce: &str,
    reply: &ControlReply,
) -> Result<String, serde_json::Error> {
    let json = serde_json::to_string(reply)?;
    Ok(format!("{TAG}.{}.{json}", hex::encode(secret.mac(REPLY_DOMAIN, &[nonce.as_bytes(), json.as_bytes()]))))
}

/// Opens a reply to the request with `nonce`.
pub(crate) fn open_reply(secret: &ClusterSecret, nonce: &str, wire: &str) -> Result<ControlReply, Refusal> {
    let (tag, json) = split(wire)?;
    if !secret.verify(REPLY_DOMAIN, &[nonce.as_bytes(), json.as_bytes()], &tag) {
        return Err(Refusal::Forged);
    }
    serde_json::from_str(json).map_err(|e| Refusal::Undecodable(e.to_string()))
}

/// `agw1.<hex mac>.<json>` → (mac, json).
fn split(wire: &str) -> Result<([u8; MAC_LEN], &str), Refusal> {
    let rest = wire.strip_prefix(TAG).and_then(|r| r.strip_prefix('.')).ok_or(Refusal::Unsigned)?;
    let (hex_tag, json) = rest.split_once('.').ok_or(Refusal::Unsigned)?;
    let mut tag = [0u8; MAC_LEN];
    hex::decode_to_slice(hex_tag, &mut tag).map_err(|_| Refusal::Unsigned)?;
    Ok((tag, json))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ControlKind;

    const NOW: u64 = 1_800_000_000_000;
    const TTL: u64 = 5_000;

    fn open(secret: &ClusterSecret, wire: &str, node_id: &str, now_ms: u64, ttl: u64) -> Result<Envelope, Refusal> {
        let envelope = verify(secret, wire)?;
        envelope.check(node_id, now_ms, ttl)?;
        Ok(envelope)
    }

    fn secret() -> ClusterSecret {
        ClusterSecret::new("the-shared-secret-of-this-cluster-0123456789").unwrap()
    }

    fn envelope() -> Envelope {
        Envelope {
            from: "b.1".into(),
            to: "a.1".into(),
            reply_to: "agw:reply:r1".into(),
            nonce: "5f0c6a3e9b1d4c27a8e2f4b6d0c9e1a3".into(),
            issued_ms: NOW,
            deadline_ms: NOW + TTL,
            request: ControlRequest {
                kind: ControlKind::Submit,
                run_id: "run-1".into(),
                body: json!({"runId": "run-1", "toolId": "call_1", "params": {"decision": "once"}}),
                principal: Some(json!({"sub": "alice"})),
            },
        }
    }

    #[test]
    fn a_sealed_envelope_opens_on_its_target_within_its_deadline() {
        let wire = seal(&secret(), &envelope()).unwrap();
        assert!(wire.starts_with("agw1."), "{wire}");
        assert_eq!(open(&secret(), &wire, "a.1", NOW + 10, TTL), Ok(envelope()));
        assert_eq!(open(&secret(), &wire, "a.1", NOW + TTL, TTL), Ok(envelope()), "the deadline itself is in time");
    }

    #[test]
    fn unsigned_and_forged_envelopes_are_refused() {
        let raw = serde_json::to_string(&envelope()).unwrap();
        assert_eq!(open(&secret(), &raw, "a.1", NOW, TTL), Err(Refusal::Unsigned), "the pre-signing JSON form");
        assert_eq!(open(&secret(), &format!("agw1.zz.{raw}"), "a.1", NOW, TTL), Err(Refusal::Unsigned));
        let zeros = format!("agw1.{}.{raw}", "0".repeat(64));
        assert_eq!(open(&secret(), &zeros, "a.1", NOW, TTL), Err(Refusal::Forged));
        let other = ClusterSecret::new("another-secret-another-secret-another-secret").unwrap();
        let wire = seal(&other, &envelope()).unwrap();
        assert_eq!(open(&secret(), &wire, "a.1", NOW, TTL), Err(Refusal::Forged), "signed with another secret");
    }

    #[test]
    fn any_field_altered_after_signing_breaks_the_mac() {
        let wire = seal(&secret(), &envelope()).unwrap();
        for (from, to) in [
            (r#""sub":"alice""#, r#""sub":"bob""#),
            (r#""decision":"once""#, r#""decision":"always""#),
            (r#""kind":"submit""#, r#""kind":"interrupt""#),
            (r#""to":"a.1""#, r#""to":"c.1""#),
            (&format!(r#""deadline_ms":{}"#, NOW + TTL), &format!(r#""deadline_ms":{}"#, NOW + 60_000)),
        ] {
            assert!(wire.contains(from), "{from} in {wire}");
            let altered = wire.replacen(from, to, 1);
            assert_eq!(open(&secret(), &altered, "a.1", NOW, TTL), Err(Refusal::Forged), "{from} → {to}");
        }
    }

    #[test]
    fn late_misdirected_and_overlong_envelopes_are_refused() {
        let wire = seal(&secret(), &envelope()).unwrap();
        assert_eq!(open(&secret(), &wire, "a.1", NOW + TTL + 1, TTL), Err(Refusal::Expired(1)));
        assert_eq!(open(&secret(), &wire, "c.1", NOW, TTL), Err(Refusal::Misdirected("a.1".into())));
        let long = Envelope { deadline_ms: NOW + 3_600_000, ..envelope() };
        let wire = seal(&secret(), &long).unwrap();
        assert_eq!(open(&secret(), &wire, "a.1", NOW, TTL), Err(Refusal::OutOfWindow), "a deadline an hour away");
        let future = Envelope { issued_ms: NOW + 60_000, deadline_ms: NOW + 60_000 + TTL, ..envelope() };
        let wire = seal(&secret(), &future).unwrap();
        assert_eq!(open(&secret(), &wire, "a.1", NOW, TTL), Err(Refusal::OutOfWindow), "issued a minute ahead");
    }

    #[test]
    fn replies_are_bound_to_their_request() {
        let reply = ControlReply { status: 200, body: json!({"data": {"accepted": true}}) };
        let wire = seal_reply(&secret(), "nonce-1", &reply).unwrap();
        assert_eq!(open_reply(&secret(), "nonce-1", &wire), Ok(reply));
        assert_eq!(open_reply(&secret(), "nonce-2", &wire), Err(Refusal::Forged), "another request's reply");
        let forged = r#"{"status":200,"body":{"data":{"accepted":true}}}"#;
        assert_eq!(open_reply(&secret(), "nonce-1", forged), Err(Refusal::Unsigned));
        let request_mac = seal(&secret(), &envelope()).unwrap();
        let (_, json) = split(&request_mac).unwrap();
        let as_reply = format!("agw1.{}.{json}", &request_mac[5..69]);
        assert_eq!(open_reply(&secret(), &envelope().nonce, &as_reply), Err(Refusal::Forged), "domains differ");
    }
}
