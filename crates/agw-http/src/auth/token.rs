//! One compact JWS: its header, checked before any key is tried, and verification against one key.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::AuthError;

/// The only algorithms accepted: RSA signatures. HMAC (`HS*`, where the "secret" could be the
/// public key) and unsigned (`none`) tokens are refused from the header alone.
pub const RSA_ALGORITHMS: [Algorithm; 6] =
    [Algorithm::RS256, Algorithm::RS384, Algorithm::RS512, Algorithm::PS256, Algorithm::PS384, Algorithm::PS512];

/// What the header says, once it is known to name an accepted algorithm.
#[derive(Debug)]
pub struct TokenHeader {
    pub kid: Option<String>,
}

/// Reads the protected header without trusting it for anything but the algorithm and `kid`.
pub fn header(token: &str) -> Result<TokenHeader, AuthError> {
    let mut parts = token.split('.');
    let (Some(head), Some(_), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(AuthError::Malformed);
    };
    let bytes = URL_SAFE_NO_PAD.decode(head).map_err(|_| AuthError::Malformed)?;
    let Ok(Value::Object(header)) = serde_json::from_slice::<Value>(&bytes) else {
        return Err(AuthError::Malformed);
    };
    let alg = header.get("alg").and_then(Value::as_str).ok_or(AuthError::Malformed)?;
    if !alg.parse::<Algorithm>().is_ok_and(|a| RSA_ALGORITHMS.contains(&a)) {
        // Name the algorithm only when it looks like one (the header is attacker-controlled).
        let shown = (alg.len() <= 16 && alg.chars().all(|c| c.is_ascii_alphanumeric())).then(|| alg.to_string());
        return Err(AuthError::UnsupportedAlgorithm(shown));
    }
    if header.contains_key("crit") {
        // RFC 7515 §4.1.11: extensions we do not understand must not be ignored.
        return Err(AuthError::UnsupportedCritical);
    }
    let kid = match header.get("kid") {
        None | Some(Value::Null) => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(AuthError::Malformed),
    };
    Ok(TokenHeader { kid })
}

/// The rules every token must meet once its signature verifies.
pub fn validation(issuer: Option<&str>, leeway_secs: u64) -> Validation {
    let mut v = Validation::new(Algorithm::RS256);
    v.algorithms = RSA_ALGORITHMS.to_vec();
    v.leeway = leeway_secs;
    v.validate_exp = true;
    v.validate_nbf = true;
    v.validate_aud = false;
    let mut required = vec!["exp", "sub"];
    if let Some(iss) = issuer {
        v.set_issuer(&[iss]);
        required.push("iss");
    }
    v.set_required_spec_claims(&required);
    v
}

/// Result of trying one key.
pub enum Attempt {
    /// Signature and claims hold: the subject and every claim (for the tenant and role claims).
    Accepted(String, Value),
    /// This key did not produce the signature: try the next one.
    WrongKey,
    /// The signature verified (the key is right) but the token is not acceptable.
    Rejected(AuthError),
}

pub fn verify(token: &str, key: &DecodingKey, validation: &Validation) -> Attempt {
    match jsonwebtoken::decode::<Value>(token, key, validation) {
        Ok(data) => match data.claims.get("sub").and_then(Value::as_str).map(str::trim) {
            Some(sub) if !sub.is_empty() => Attempt::Accepted(sub.to_string(), data.claims),
            _ => Attempt::Rejected(AuthError::MissingClaim("sub")),
        },
        Err(e) => match e.into_kind() {
            ErrorKind::InvalidSignature
            | ErrorKind::InvalidKeyFormat
            | ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidEcdsaKey
            | ErrorKind::Provider(_)
            | ErrorKind::Signing(_) => Attempt::WrongKey,
            ErrorKind::ExpiredSignature => Attempt::Rejected(AuthError::Expired),
            ErrorKind::ImmatureSignature => Attempt::Rejected(AuthError::NotYetValid),
            ErrorKind::InvalidIssuer => Attempt::Rejected(AuthError::InvalidIssuer),
            ErrorKind::MissingRequiredClaim(claim) => Attempt::Rejected(AuthError::MissingClaim(claim_name(&claim))),
            ErrorKind::InvalidClaimFormat(claim) => Attempt::Rejected(AuthError::InvalidClaim(claim_name(&claim))),
            ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName | ErrorKind::UnsupportedAlgorithm => {
                Attempt::Rejected(AuthError::UnsupportedAlgorithm(None))
            }
            _ => Attempt::Rejected(AuthError::Malformed),
        },
    }
}

fn claim_name(claim: &str) -> &'static str {
    match claim {
        "exp" => "exp",
        "nbf" => "nbf",
        "iss" => "iss",
        "sub" => "sub",
        "aud" => "aud",
        _ => "required",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(v: &str) -> String {
        URL_SAFE_NO_PAD.encode(v)
    }

    #[test]
    fn header_rules() {
        let tok = |h: &str| format!("{}.{}.sig", b64(h), b64("{}"));
        assert!(header(&tok(r#"{"alg":"RS256","kid":"k1"}"#)).unwrap().kid.as_deref() == Some("k1"));
        assert!(header(&tok(r#"{"alg":"PS512"}"#)).unwrap().kid.is_none());
        assert_eq!(
            header(&tok(r#"{"alg":"none"}"#)).unwrap_err(),
            AuthError::UnsupportedAlgorithm(Some("none".into()))
        );
        assert_eq!(
            header(&tok(r#"{"alg":"HS256"}"#)).unwrap_err(),
            AuthError::UnsupportedAlgorithm(Some("HS256".into()))
        );
        assert_eq!(header(&tok(r#"{"alg":"RS256","crit":["x"]}"#)).unwrap_err(), AuthError::UnsupportedCritical);
        assert_eq!(header(&tok(r#"{"kid":"a"}"#)).unwrap_err(), AuthError::Malformed);
        assert_eq!(header("a.b").unwrap_err(), AuthError::Malformed);
        assert_eq!(header("a.b.c.d").unwrap_err(), AuthError::Malformed);
        assert_eq!(header("!!.b.c").unwrap_err(), AuthError::Malformed);
    }
}
