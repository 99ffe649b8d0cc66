//! JWT bearer authentication (`docs/contract/http-api.md` §9, docs/contract/README.md decisions).
//!
//! Enforced whenever a key source is configured (a local RSA public key and/or a JWKS URI) unless
//! `AGENT_AUTH_ENABLED=false`. Every request to `/api/**`, `/v1/**`, `/mcp`, `/chat` and `/metrics`
//! except `OPTIONS` (`protects`, `mcp_server::protects`) then needs
//! `Authorization: Bearer <token>`: an RSA-signed JWS (RS256/384/512, PS256/384/512; `none` and
//! HMAC tokens are refused from the header, before any key is tried) whose signature verifies with
//! the local key or, failing that, a JWKS key; `exp` required, `nbf` honoured, both with
//! [`LEEWAY_SECS`] of clock skew; `sub` non-blank; `iss` equal to `agent.auth.issuer` when set.
//! Failures answer 401 with the envelope `{"code":401,"msg":"unauthorized: <reason>","data":{}}`;
//! the token itself never appears in a response or a log line.
//!
//! The verified caller is a [`Principal`] in the request's extensions: subject, tenant (when
//! `agw.auth.tenant-claim` names one) and whether it holds the operator role
//! (`agw.auth.operator-claim` contains `agw.auth.operator-role`). Handlers decide access to chats
//! and runs with [`may_access`] (docs/security.md, "Per-user isolation").

mod jwks;
mod key;
mod token;

use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use jsonwebtoken::Validation;

pub use jwks::{JwksSource, MIN_CACHE as MIN_JWKS_CACHE};
pub use key::{KeyProblem, LocalPublicKey, MIN_RSA_BITS};
pub use token::RSA_ALGORITHMS;

use serde_json::Value;

use crate::body::BoxBody;
use crate::envelope::ApiError;
use jwks::JwksCache;
use token::Attempt;

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 5;

/// Typed `agent.auth.*` settings, validated at startup (see `config.rs`).
#[derive(Debug, Clone, Default)]
pub struct AuthSettings {
    /// `agent.auth.enabled`: `Some(false)` only when explicitly disabled.
    pub enabled: Option<bool>,
    /// `agent.auth.local-public-key`: a fixed RSA key tokens may be signed with.
    pub local_public_key: Option<LocalPublicKey>,
    /// `agent.auth.jwks-uri` and its companions: a key set tokens may be signed with.
    pub jwks: Option<JwksSettings>,
    /// Least time between two JWKS fetches (`agw.auth.jwks-refetch-interval`).
    pub jwks_refetch_interval: Duration,
    /// Which claims say the tenant and the operator role.
    pub identity: IdentityClaims,
}

/// `agw.auth.tenant-claim`, `agw.auth.operator-claim`, `agw.auth.operator-role`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityClaims {
    /// Claim holding the tenant; `None`: one tenant (owners are subjects alone).
    pub tenant_claim: Option<String>,
    /// Claim holding the roles (a string, space-separated roles, or an array of strings).
    pub operator_claim: String,
    /// The role that may see every chat and run; `None`: nobody may.
    pub operator_role: Option<String>,
}

impl IdentityClaims {
    /// The principal these claims describe, or why the token is not acceptable.
    fn principal(&self, subject: String, claims: &Value) -> Result<Principal, AuthError> {
        let tenant = match &self.tenant_claim {
            None => None,
            Some(name) => match claim(claims, name) {
                Some(Value::String(t)) if !t.trim().is_empty() => Some(t.trim().to_string()),
                Some(Value::Number(n)) => Some(n.to_string()),
                None | Some(Value::Null) => return Err(AuthError::MissingTenant),
                Some(_) => return Err(AuthError::InvalidTenant),
            },
        };
        let operator = self.operator_role.as_deref().is_some_and(|role| match claim(claims, &self.operator_claim) {
            Some(Value::String(roles)) => roles.split_whitespace().any(|r| r == role),
            Some(Value::Array(roles)) => roles.iter().any(|r| r.as_str() == Some(role)),
            _ => false,
        });
        Ok(Principal { subject, tenant, operator })
    }
}

/// A claim by name: the top-level key as written (names like `https://example.com/roles` are
/// common), else a dotted path into nested objects (`realm_access.roles`).
fn claim<'a>(claims: &'a Value, name: &str) -> Option<&'a Value> {
    claims.get(name).or_else(|| name.split('.').try_fold(claims, |value, part| value.get(part)))
}

/// `agent.auth.jwks-uri`, `issuer` and `jwks-cache-seconds`, which only exist together.
#[derive(Debug, Clone)]
pub struct JwksSettings {
    /// Where the key set is fetched or read from.
    pub source: JwksSource,
    /// The required `iss` of every token.
    pub issuer: String,
    /// How long a fetched set is kept, in seconds; raised to [`MIN_JWKS_CACHE`] when lower.
    pub cache_seconds: u64,
}

impl AuthSettings {
    /// Whether any key is configured to verify tokens with (a local key, a JWKS, or both).
    pub fn has_key_source(&self) -> bool {
        self.local_public_key.is_some() || self.jwks.is_some()
    }

    /// Whether `/api/ap/**` requires a token.
    pub fn enforced(&self) -> bool {
        self.enabled != Some(false) && self.has_key_source()
    }

    /// The configured key sources, for the startup log line.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(k) = &self.local_public_key {
            parts.push(format!("local RSA public key ({} bits)", k.bits()));
        }
        if let Some(j) = &self.jwks {
            parts.push(format!(
                "JWKS {} (cache {} s, issuer {:?})",
                j.source,
                Duration::from_secs(j.cache_seconds).max(MIN_JWKS_CACHE).as_secs(),
                j.issuer
            ));
        }
        if parts.is_empty() { "no key source".into() } else { parts.join(" + ") }
    }
}

/// Whether a request is subject to auth: `/api/**` (agw's own API and the AI SDK / AG-UI
/// endpoints), `/v1/**` (the OpenAI façade), `/chat` (the phase stream of the default agent) and
/// `/metrics` (agent keys, models, token and cost
/// counters are not for anyone who can reach the port), every method but `OPTIONS`. The probes
/// (`/healthz`, `/readyz`) stay open.
pub(crate) fn protects(method: &Method, path: &str) -> bool {
    (path.starts_with("/api/")
        || path.starts_with("/v1/")
        || path == "/metrics"
        // The phase stream's `routes::PHASE_CHAT_PATH`, written out: routes depends on auth,
        // not the other way round (a routes unit test keeps the two equal).
        || path == "/chat"
        // A2A endpoints; their agent cards are public (discovery names the auth they need).
        || (path.starts_with("/a2a/") && !path.ends_with("/.well-known/agent-card.json")))
        && method != Method::OPTIONS
}

/// The verified caller (attached to the request's extensions) and the access rule, from the run
/// core.
pub use agw_runs::{Principal, may_access};

/// Why a request was not authenticated. The `Display` text is the reason in the 401 `msg`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization` header, or `Bearer` with no token after it.
    #[error("missing bearer token")]
    MissingToken,
    /// An `Authorization` header whose scheme is not `Bearer`.
    #[error("authorization scheme must be Bearer")]
    WrongScheme,
    /// Not three base64url parts with a JSON header naming `alg`, or a header value that is not text.
    #[error("malformed token")]
    Malformed,
    /// The `Authorization` header exceeds the limit, in bytes.
    #[error("authorization header longer than {0} bytes")]
    TooLarge(usize),
    /// The `alg` is not one agw verifies (the name, when the header gives one).
    #[error("unsupported algorithm{}", .0.as_ref().map(|a| format!(" {a}")).unwrap_or_default())]
    UnsupportedAlgorithm(Option<String>),
    /// The token header has `crit`: agw understands no extensions, so it may not ignore them (RFC 7515).
    #[error("unsupported critical header")]
    UnsupportedCritical,
    /// No configured key verifies the signature.
    #[error("invalid signature")]
    InvalidSignature,
    /// No key was tried: no local key, and the JWKS offered none (unreachable, or no key for the `kid`).
    #[error("no signing key available")]
    NoKeys,
    /// `exp` is past, beyond [`LEEWAY_SECS`].
    #[error("token expired")]
    Expired,
    /// `nbf` is in the future, beyond [`LEEWAY_SECS`].
    #[error("token not yet valid")]
    NotYetValid,
    /// `iss` differs from the configured issuer.
    #[error("invalid issuer")]
    InvalidIssuer,
    /// A required claim (named) is absent.
    #[error("missing {0} claim")]
    MissingClaim(&'static str),
    /// A claim (named) has the wrong type or format.
    #[error("invalid {0} claim")]
    InvalidClaim(&'static str),
    /// `agw.auth.tenant-claim` is configured but the token lacks it.
    #[error("missing tenant claim")]
    MissingTenant,
    /// The tenant claim is neither a non-blank string nor a number.
    #[error("invalid tenant claim")]
    InvalidTenant,
}

impl AuthError {
    /// 401 with the envelope and a `WWW-Authenticate: Bearer` challenge.
    pub fn into_response(self) -> Response<BoxBody> {
        let mut resp = ApiError::new(StatusCode::UNAUTHORIZED, format!("unauthorized: {self}")).into_response();
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        resp
    }
}

/// Verifies bearer tokens against the configured key sources.
pub struct Authenticator {
    local: Option<LocalPublicKey>,
    jwks: Option<JwksCache>,
    validation: Validation,
    identity: IdentityClaims,
}

impl Authenticator {
    /// `None` when auth is not enforced.
    pub fn new(settings: &AuthSettings) -> Option<Self> {
        if !settings.enforced() {
            return None;
        }
        Some(Self {
            local: settings.local_public_key.clone(),
            jwks: settings
                .jwks
                .as_ref()
                .map(|j| JwksCache::new(j.source.clone(), j.cache_seconds, settings.jwks_refetch_interval)),
            validation: token::validation(settings.jwks.as_ref().map(|j| j.issuer.as_str()), LEEWAY_SECS),
            identity: settings.identity.clone(),
        })
    }

    /// Checks the `Authorization` header of a request.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        let token = bearer(headers)?;
        let header = token::header(token)?;
        let mut tried = false;
        if let Some(local) = &self.local {
            tried = true;
            match token::verify(token, local.decoding_key(), &self.validation) {
                Attempt::Accepted(subject, claims) => return self.identity.principal(subject, &claims),
                Attempt::Rejected(e) => return Err(e),
                Attempt::WrongKey => {}
            }
        }
        if let Some(jwks) = &self.jwks {
            let set = jwks.keys(header.kid.as_deref()).await;
            for key in set.candidates(header.kid.as_deref()) {
                tried = true;
                match token::verify(token, key, &self.validation) {
                    Attempt::Accepted(subject, claims) => return self.identity.principal(subject, &claims),
                    Attempt::Rejected(e) => return Err(e),
                    Attempt::WrongKey => {}
                }
            }
        }
        Err(if tried { AuthError::InvalidSignature } else { AuthError::NoKeys })
    }
}

/// The token of `Authorization: Bearer <token>` (exact, case-sensitive `Bearer ` prefix, as the
/// reference; the rest trimmed).
fn bearer(headers: &HeaderMap) -> Result<&str, AuthError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else { return Err(AuthError::MissingToken) };
    let value = value.to_str().map_err(|_| AuthError::Malformed)?.trim();
    // hyper trims header values, so `Bearer ` with nothing after it arrives as `Bearer`.
    if value.is_empty() || value == "Bearer" {
        return Err(AuthError::MissingToken);
    }
    let token = value.strip_prefix("Bearer ").ok_or(AuthError::WrongScheme)?.trim();
    if token.is_empty() { Err(AuthError::MissingToken) } else { Ok(token) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agw_memory::Owner;

    fn with_auth(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer(&HeaderMap::new()), Err(AuthError::MissingToken));
        assert_eq!(bearer(&with_auth("Bearer   abc ")), Ok("abc"));
        assert_eq!(bearer(&with_auth("Bearer ")), Err(AuthError::MissingToken));
        assert_eq!(bearer(&with_auth("Basic dXNlcjpwdw==")), Err(AuthError::WrongScheme));
        assert_eq!(bearer(&with_auth("bearer abc")), Err(AuthError::WrongScheme));
    }

    #[test]
    fn scope() {
        assert!(protects(&Method::POST, "/api/ap/query"));
        assert!(protects(&Method::GET, "/api/ap/data/x.csv"));
        assert!(!protects(&Method::OPTIONS, "/api/ap/query"));
        assert!(!protects(&Method::GET, "/healthz"));
        assert!(!protects(&Method::GET, "/readyz"));
        assert!(protects(&Method::GET, "/metrics"));
    }

    #[test]
    fn identity_from_claims() {
        let identity = IdentityClaims {
            tenant_claim: Some("org".into()),
            operator_claim: "realm_access.roles".into(),
            operator_role: Some("agw-admin".into()),
        };
        let p = identity
            .principal("alice".into(), &serde_json::json!({"org":"acme","realm_access":{"roles":["x","agw-admin"]}}))
            .unwrap();
        assert_eq!((p.tenant.as_deref(), p.operator), (Some("acme"), true));
        let p = identity
            .principal("bob".into(), &serde_json::json!({"org":"acme","realm_access":{"roles":"agw-admins"}}))
            .unwrap();
        assert!(!p.operator, "roles match whole words only");
        assert_eq!(identity.principal("c".into(), &serde_json::json!({})), Err(AuthError::MissingTenant));
        assert_eq!(identity.principal("c".into(), &serde_json::json!({"org":["a"]})), Err(AuthError::InvalidTenant));
        let no_role = IdentityClaims { operator_claim: "roles".into(), ..Default::default() };
        assert!(!no_role.principal("d".into(), &serde_json::json!({"roles":[""]})).unwrap().operator);
    }

    #[test]
    fn access_rules() {
        let owner = |sub: &str, tenant: Option<&str>| Owner { sub: sub.into(), tenant: tenant.map(Into::into) };
        let alice = Principal { subject: "alice".into(), tenant: Some("t1".into()), operator: false };
        assert!(alice.can_access(Some(&owner("alice", Some("t1")))));
        assert!(!alice.can_access(Some(&owner("alice", Some("t2")))), "same subject, other tenant");
        assert!(!alice.can_access(Some(&owner("alice", None))));
        assert!(!alice.can_access(Some(&owner("bob", Some("t1")))));
        assert!(!alice.can_access(None), "ownerless chats are the operator's");
        let operator = Principal { operator: true, ..alice.clone() };
        assert!(operator.can_access(None) && operator.can_access(Some(&owner("bob", None))));
        assert!(may_access(None, Some(&owner("bob", None))), "auth off: one user");
        assert!(may_access(None, None));
    }

    #[test]
    fn reasons_read_well() {
        assert_eq!(AuthError::UnsupportedAlgorithm(Some("HS256".into())).to_string(), "unsupported algorithm HS256");
        assert_eq!(AuthError::UnsupportedAlgorithm(None).to_string(), "unsupported algorithm");
        assert_eq!(AuthError::MissingClaim("sub").to_string(), "missing sub claim");
    }
}
