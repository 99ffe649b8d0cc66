//! `agent.cors.*` (docs/contract/config.md §8; list items trimmed, blanks dropped).

use http::{HeaderName, Method};

use super::ConfigError;
use super::source::Source;
use super::table::{
    AGENT_CORS_ALLOW_CREDENTIALS, AGENT_CORS_ALLOWED_HEADERS, AGENT_CORS_ALLOWED_METHODS,
    AGENT_CORS_ALLOWED_ORIGIN_PATTERNS, AGENT_CORS_EXPOSED_HEADERS, AGENT_CORS_MAX_AGE_SECONDS,
    AGENT_CORS_PATH_PATTERN,
};
use super::value::{self, ValueError};
use crate::cors::CorsConfig;

pub(super) fn load(src: &Source) -> Result<CorsConfig, ConfigError> {
    let path_patterns = src.parse(&AGENT_CORS_PATH_PATTERN, |s| {
        let Ok(patterns) = value::list(s);
        match patterns.iter().find(|p| !p.starts_with('/')) {
            Some(bad) => Err(format!("{bad:?} must start with /")),
            None if patterns.is_empty() => Err("give at least one path pattern".into()),
            None => Ok(patterns),
        }
    })?;
    Ok(CorsConfig {
        path_patterns,
        allowed_origin_patterns: src
            .parse_opt(&AGENT_CORS_ALLOWED_ORIGIN_PATTERNS, value::origin_list)?
            .unwrap_or_default(),
        allowed_methods: src.parse_opt(&AGENT_CORS_ALLOWED_METHODS, methods)?.unwrap_or_default(),
        allowed_headers: src.parse_opt(&AGENT_CORS_ALLOWED_HEADERS, headers)?.unwrap_or_default(),
        exposed_headers: src.parse_opt(&AGENT_CORS_EXPOSED_HEADERS, headers)?.unwrap_or_default(),
        allow_credentials: src.parse(&AGENT_CORS_ALLOW_CREDENTIALS, value::bool)?,
        max_age_seconds: src.parse(&AGENT_CORS_MAX_AGE_SECONDS, value::whole)?,
    })
}

fn methods(s: &str) -> Result<Vec<String>, ValueError> {
    let Ok(items) = value::list(s);
    match items.iter().find(|m| m.as_str() != "*" && Method::from_bytes(m.as_bytes()).is_err()) {
        Some(bad) => Err(ValueError::Item { item: bad.clone(), kind: "an HTTP method" }),
        None => Ok(items.into_iter().map(|m| m.to_ascii_uppercase()).collect()),
    }
}

fn headers(s: &str) -> Result<Vec<String>, ValueError> {
    let Ok(items) = value::list(s);
    match items.iter().find(|h| h.as_str() != "*" && HeaderName::from_bytes(h.as_bytes()).is_err()) {
        Some(bad) => Err(ValueError::Item { item: bad.clone(), kind: "a header name" }),
        None => Ok(items),
    }
}
