//! The cross-site rule: a browser page on another site may not start or change anything.
//!
//! CORS alone does not stop that. A "simple" request (a `POST` with a `text/plain` body, a form
//! post) is sent by the browser without a preflight; CORS only keeps the page from reading the
//! answer, by which time the run has started and its tools have run. And CORS covers only
//! `agent.cors.path-pattern`. So, at the door, after the Host check and before CORS, auth and
//! routing, on every path: a request with any method but `GET`, `HEAD` and `OPTIONS` is refused
//! with 403 `origin_not_allowed` when
//!
//! - its `Origin` is neither this server (compared with `Host`, as CORS does) nor allowed by
//!   `agent.cors.allowed-origin-patterns`;
//! - its `Origin` is `null` (sandboxed frames, `file:` pages, data URLs, redirects across
//!   origins: a page that cannot be identified), whatever the patterns say (`*` included);
//! - it has no `Origin` but `Sec-Fetch-Site: cross-site` (a browser that did not send `Origin`).
//!
//! Clients that are not browsers send neither header and are not affected. `GET` and `HEAD` do
//! not change state anywhere in agw, so they stay governed by CORS alone.

use http::header::{self, HeaderName};
use http::{Method, Request, StatusCode};
use serde_json::json;

use crate::cors::{self, CorsConfig};
use crate::envelope::ApiError;

/// The string `code` of the refusal.
pub const CODE: &str = "origin_not_allowed";

/// `Sec-Fetch-Site` (Fetch Metadata): what the browser says about the request's initiator.
const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrossSite {
    /// An `Origin` that is not this server and not allowed.
    #[error("origin not allowed: {0} (agent.cors.allowed-origin-patterns)")]
    Foreign(String),
    /// `Origin: null`.
    #[error("origin not allowed: null (a sandboxed or local page)")]
    Null,
    /// More than one `Origin`, or one that is not text.
    #[error("origin not allowed: unreadable Origin header")]
    Unreadable,
    /// No `Origin`, but the browser says the request comes from another site.
    #[error("origin not allowed: Sec-Fetch-Site: cross-site")]
    SecFetchSite,
}

impl From<CrossSite> for ApiError {
    fn from(e: CrossSite) -> Self {
        ApiError::with_fields(StatusCode::FORBIDDEN, format!("forbidden: {e}"), json!({ "code": CODE }))
    }
}

/// Whether `method` may change state (anything but `GET`, `HEAD`, `OPTIONS`).
pub fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// `Ok` unless the request changes state and comes from a page that is not allowed to.
pub fn check<B>(cors: &CorsConfig, req: &Request<B>) -> Result<(), CrossSite> {
    if !changes_state(req.method()) {
        return Ok(());
    }
    let headers = req.headers();
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let Some(origin) = origins.next() else {
        let site = headers.get(SEC_FETCH_SITE).and_then(|v| v.to_str().ok()).map(str::trim);
        return match site {
            Some(site) if site.eq_ignore_ascii_case("cross-site") => Err(CrossSite::SecFetchSite),
            _ => Ok(()),
        };
    };
    if origins.next().is_some() {
        return Err(CrossSite::Unreadable);
    }
    let origin = origin.to_str().map_err(|_| CrossSite::Unreadable)?.trim();
    if origin.eq_ignore_ascii_case("null") {
        return Err(CrossSite::Null);
    }
    // HTTP/1.1 names the server in `Host`, HTTP/2 in `:authority` (the URI's authority).
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).or(req.uri().authority().map(|a| a.as_str()));
    if cors::same_origin(origin, host) || cors.origin_allowed(origin) {
        return Ok(());
    }
    Err(CrossSite::Foreign(origin.chars().take(100).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder().method(method).uri("/v1/chat/completions");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn foreign_null_and_cross_site_requests_that_change_state_are_refused() {
        let cors = CorsConfig::default();
        let host = ("host", "127.0.0.1:8080");
        for (headers, expected) in [
            (vec![host, ("origin", "https://evil.example")], CrossSite::Foreign("https://evil.example".into())),
            (vec![host, ("origin", "null")], CrossSite::Null),
            (vec![host, ("origin", "NULL")], CrossSite::Null),
            (vec![host, ("sec-fetch-site", "cross-site")], CrossSite::SecFetchSite),
            (
                vec![host, ("origin", "http://localhost:5173"), ("origin", "https://evil.example")],
                CrossSite::Unreadable,
            ),
            (
                vec![host, ("origin", "http://localhost:5173.evil.example")],
                CrossSite::Foreign("http://localhost:5173.evil.example".into()),
            ),
        ] {
            for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
                assert_eq!(
                    check(&cors, &request(method.clone(), &headers)),
                    Err(expected.clone()),
                    "{method} {headers:?}"
                );
            }
            for method in [Method::GET, Method::HEAD, Method::OPTIONS] {
                assert_eq!(check(&cors, &request(method.clone(), &headers)), Ok(()), "{method} {headers:?}");
            }
        }
    }

    #[test]
    fn same_origin_allowed_origins_and_clients_without_origin_pass() {
        let cors = CorsConfig::default();
        let host = ("host", "127.0.0.1:8080");
        for headers in [
            vec![host],
            vec![host, ("origin", "http://127.0.0.1:8080")],
            vec![host, ("origin", "http://localhost:5173")],
            vec![host, ("sec-fetch-site", "same-origin")],
            vec![host, ("sec-fetch-site", "none")],
            vec![host, ("origin", "http://localhost:5173"), ("sec-fetch-site", "cross-site")],
        ] {
            assert_eq!(check(&cors, &request(Method::POST, &headers)), Ok(()), "{headers:?}");
        }
        let any = CorsConfig { allowed_origin_patterns: vec!["*".into()], ..CorsConfig::default() };
        assert_eq!(check(&any, &request(Method::POST, &[host, ("origin", "https://app.example")])), Ok(()));
        assert_eq!(check(&any, &request(Method::POST, &[host, ("origin", "null")])), Err(CrossSite::Null));
    }

    #[test]
    fn the_refusal_carries_its_code() {
        let e = ApiError::from(CrossSite::Foreign("https://evil.example".into()));
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        assert_eq!(e.body.as_ref().unwrap()["code"], CODE);
        assert!(e.msg.starts_with("forbidden: origin not allowed: https://evil.example"), "{}", e.msg);
    }
}
