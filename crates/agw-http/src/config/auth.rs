//! `agent.auth.*`, checked as docs/contract/http-api.md §9 says: a key setting that is present but unusable
//! refuses startup with a message naming it.

use super::source::Source;
use super::table::{
    AGENT_AUTH_ENABLED, AGENT_AUTH_ISSUER, AGENT_AUTH_JWKS_CACHE_SECONDS, AGENT_AUTH_JWKS_URI,
    AGENT_AUTH_LOCAL_PUBLIC_KEY, AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE, AGW_AUTH_JWKS_REFETCH_INTERVAL,
    AGW_AUTH_OPERATOR_CLAIM, AGW_AUTH_OPERATOR_ROLE, AGW_AUTH_TENANT_CLAIM,
};
use super::{ConfigError, value};
use crate::auth::{AuthSettings, IdentityClaims, JwksSettings, JwksSource, KeyProblem, LocalPublicKey};

pub(super) fn load(src: &Source) -> Result<AuthSettings, ConfigError> {
    const TOGETHER: &str =
        "agent.auth.jwks-uri, agent.auth.issuer and agent.auth.jwks-cache-seconds must be configured together";
    let fail = |message: String| ConfigError::Auth { message };
    let enabled = src.parse_opt(&AGENT_AUTH_ENABLED, value::bool)?;

    let inline = src.text(&AGENT_AUTH_LOCAL_PUBLIC_KEY);
    let file = src.text(&AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE).filter(|p| !p.trim().is_empty());
    let (pem, from) = match (inline, file) {
        (Some(_), Some(_)) => {
            return Err(fail(
                "set only one of agent.auth.local-public-key (AGENT_AUTH_LOCAL_PUBLIC_KEY) and agent.auth.local-public-key-file (AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE)".into(),
            ));
        }
        (Some(pem), None) => (Some(pem), "agent.auth.local-public-key / AGENT_AUTH_LOCAL_PUBLIC_KEY".to_string()),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path.trim()).map_err(|e| {
                fail(format!(
                    "agent.auth.local-public-key-file (AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE): cannot read {:?}: {e}",
                    path.trim()
                ))
            })?;
            (Some(text), format!("agent.auth.local-public-key-file {:?}", path.trim()))
        }
        (None, None) => (None, String::new()),
    };
    let local_public_key = match pem {
        None => None,
        Some(pem) => Some(LocalPublicKey::from_pem(&pem).map_err(|problem| match problem {
            KeyProblem::Blank => fail(format!("agent.auth.local-public-key cannot be blank (from {from})")),
            KeyProblem::Invalid(why) => {
                fail(format!("agent.auth.local-public-key is not a valid PEM RSA public key (from {from}): {why}"))
            }
        })?),
    };

    let uri = src.text(&AGENT_AUTH_JWKS_URI).filter(|v| !v.trim().is_empty());
    let issuer = src.text(&AGENT_AUTH_ISSUER).filter(|v| !v.trim().is_empty());
    let cache = src.text(&AGENT_AUTH_JWKS_CACHE_SECONDS).filter(|v| !v.trim().is_empty());
    let jwks = match (uri, issuer, cache) {
        (None, None, None) => None,
        (Some(uri), Some(issuer), Some(cache)) => {
            let cache_seconds = match cache.trim().parse::<i64>() {
                Ok(n) if n > 0 => n as u64,
                Ok(_) => {
                    return Err(fail(format!(
                        "agent.auth.jwks-cache-seconds must be greater than 0 (AGENT_AUTH_JWKS_CACHE_SECONDS is {cache:?})"
                    )));
                }
                Err(_) => {
                    return Err(fail(format!(
                        "agent.auth.jwks-cache-seconds (AGENT_AUTH_JWKS_CACHE_SECONDS): {cache:?} is not a whole number of seconds"
                    )));
                }
            };
            let source = JwksSource::parse(uri.trim())
                .map_err(|e| fail(format!("agent.auth.jwks-uri (AGENT_AUTH_JWKS_URI): {e}")))?;
            Some(JwksSettings { source, issuer, cache_seconds })
        }
        (uri, issuer, cache) => {
            let missing: Vec<&str> = [
                (uri.is_none(), "agent.auth.jwks-uri (AGENT_AUTH_JWKS_URI)"),
                (issuer.is_none(), "agent.auth.issuer (AGENT_AUTH_ISSUER)"),
                (cache.is_none(), "agent.auth.jwks-cache-seconds (AGENT_AUTH_JWKS_CACHE_SECONDS)"),
            ]
            .into_iter()
            .filter_map(|(missing, name)| missing.then_some(name))
            .collect();
            return Err(fail(format!("{TOGETHER}; missing: {}", missing.join(", "))));
        }
    };
    let settings = AuthSettings {
        enabled,
        local_public_key,
        jwks,
        jwks_refetch_interval: src.parse(&AGW_AUTH_JWKS_REFETCH_INTERVAL, value::duration)?,
        identity: IdentityClaims {
            tenant_claim: src.text(&AGW_AUTH_TENANT_CLAIM).map(|c| c.trim().to_string()).filter(|c| !c.is_empty()),
            operator_claim: src.text(&AGW_AUTH_OPERATOR_CLAIM).unwrap_or_default().trim().to_string(),
            operator_role: src.text(&AGW_AUTH_OPERATOR_ROLE).map(|r| r.trim().to_string()).filter(|r| !r.is_empty()),
        },
    };
    if enabled == Some(true) && !settings.has_key_source() {
        return Err(fail(
            "agent.auth.enabled (AGENT_AUTH_ENABLED) is true but no key source is configured: set agent.auth.local-public-key (AGENT_AUTH_LOCAL_PUBLIC_KEY / AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE) or agent.auth.jwks-uri (AGENT_AUTH_JWKS_URI)".into(),
        ));
    }
    Ok(settings)
}
