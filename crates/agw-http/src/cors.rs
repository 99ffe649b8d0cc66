//! CORS for `agent.cors.path-pattern` (`docs/contract/http-api.md` §10, `docs/contract/config.md` §8; agw takes a
//! comma-separated list of patterns).
//!
//! CORS decides what a page on an allowed origin may read, and answers preflights. It does not
//! stop a foreign page from *sending* a simple request: that is the cross-site rule at the door
//! ([`crate::cross_site`]), which runs before this on every path.
//!
//! Runs before auth: a preflight from an allowed origin is answered 200 here and never needs a
//! token; a disallowed origin gets 403 `Invalid CORS request`; an actual cross-origin request
//! from an allowed origin is served and its response (401s included, SSE streams untouched: only
//! headers are added) carries `Access-Control-Allow-Origin: <origin>`, the exposed headers and
//! `Vary: Origin`. Requests without `Origin`, same-origin requests and paths outside the pattern
//! pass untouched.

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use crate::body::{BoxBody, full};

/// Typed `agent.cors.*` settings.
#[derive(Debug, Clone)]
pub struct CorsConfig {
    /// Ant-style path patterns (`**` any number of segments, `*` and `?` inside a segment); CORS
    /// applies to a path any of them matches.
    pub path_patterns: Vec<String>,
    /// Origin patterns; `*` matches any run of characters, except as the port
    /// (`http://localhost:*`), where it matches digits only; a trailing `:[*]` / `:[8080,8081]`
    /// matches an optional / listed port.
    pub allowed_origin_patterns: Vec<String>,
    /// Methods a preflight may ask for (`*` = any).
    pub allowed_methods: Vec<String>,
    /// Request headers a preflight may ask for (`*` = any; the requested ones are echoed).
    pub allowed_headers: Vec<String>,
    /// Response headers a browser script may read (`Access-Control-Expose-Headers`); empty: none named.
    pub exposed_headers: Vec<String>,
    /// Send `Access-Control-Allow-Credentials: true` (cookies and auth headers may be sent cross-origin).
    pub allow_credentials: bool,
    /// How long a browser may cache a preflight answer, in seconds.
    pub max_age_seconds: u64,
}

impl Default for CorsConfig {
    fn default() -> Self {
        let list = |s: &str| s.split(',').map(str::to_string).collect();
        Self {
            path_patterns: DEFAULT_PATH_PATTERNS.iter().map(|p| p.to_string()).collect(),
            allowed_origin_patterns: DEFAULT_ORIGIN_PATTERNS.iter().map(|p| p.to_string()).collect(),
            allowed_methods: list("GET,POST,PUT,PATCH,DELETE,OPTIONS"),
            allowed_headers: list("*"),
            exposed_headers: list("Content-Type"),
            allow_credentials: false,
            max_age_seconds: 3600,
        }
    }
}

/// Every loopback origin, any port or none: a web client served from this machine (a dev server
/// on `http://127.0.0.1:5173`, say) works without configuration. Same as the table's default of
/// `agent.cors.allowed-origin-patterns`.
pub const DEFAULT_ORIGIN_PATTERNS: [&str; 3] = ["http://localhost:[*]", "http://127.0.0.1:[*]", "http://[::1]:[*]"];

/// agw's API (and the AI SDK / AG-UI / phase endpoints), the OpenAI façade, MCP and `/chat`: every route a browser
/// client calls. Same as the table's default of `agent.cors.path-pattern`.
pub const DEFAULT_PATH_PATTERNS: [&str; 4] = ["/api/**", "/v1/**", "/mcp", "/chat"];

/// What to do with a request.
pub enum Cors {
    /// Not a cross-origin request under the pattern: serve it as is.
    Skip,
    /// Answered here: a preflight (200) or a rejection (403).
    Respond(Response<BoxBody>),
    /// Serve it, then add these headers to the response.
    Decorate(Vec<(HeaderName, HeaderValue)>),
}

const VARY_PREFLIGHT: &str = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers";

impl CorsConfig {
    /// Decides a request by its `Origin`, path and method: same-origin and origin-less requests pass untouched.
    pub fn check<B>(&self, req: &Request<B>) -> Cors {
        let Some(origin) = req.headers().get(header::ORIGIN) else { return Cors::Skip };
        if !self.path_patterns.iter().any(|p| path_matches(p, req.uri().path())) {
            return Cors::Skip;
        }
        let Ok(origin_text) = origin.to_str() else { return reject() };
        if same_origin(origin_text, req.headers().get(header::HOST).and_then(|h| h.to_str().ok())) {
            return Cors::Skip;
        }
        if !self.origin_allowed(origin_text) {
            return reject();
        }
        let requested_method = req.headers().get(header::ACCESS_CONTROL_REQUEST_METHOD);
        if req.method() == Method::OPTIONS
            && let Some(requested_method) = requested_method
        {
            return self.preflight(origin, requested_method, req.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS));
        }
        if !self.method_allowed(req.method().as_str()) {
            return reject();
        }
        let mut headers = vec![(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone())];
        if !self.exposed_headers.is_empty()
            && let Ok(v) = HeaderValue::from_str(&self.exposed_headers.join(", "))
        {
            headers.push((header::ACCESS_CONTROL_EXPOSE_HEADERS, v));
        }
        if self.allow_credentials {
            headers.push((header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true")));
        }
        headers.push((header::VARY, HeaderValue::from_static("Origin")));
        Cors::Decorate(headers)
    }

    fn preflight(&self, origin: &HeaderValue, method: &HeaderValue, requested: Option<&HeaderValue>) -> Cors {
        let Ok(method) = method.to_str() else { return reject() };
        if !self.method_allowed(method.trim()) {
            return reject();
        }
        let requested: Vec<&str> = match requested.map(|h| h.to_str()) {
            None => Vec::new(),
            Some(Ok(list)) => list.split(',').map(str::trim).filter(|h| !h.is_empty()).collect(),
            Some(Err(_)) => return reject(),
        };
        let any_header = self.allowed_headers.iter().any(|h| h == "*");
        if !any_header && !requested.iter().all(|r| self.allowed_headers.iter().any(|a| a.eq_ignore_ascii_case(r))) {
            return reject();
        }
        let allow_methods = if self.allowed_methods.iter().any(|m| m == "*") {
            method.trim().to_string()
        } else {
            self.allowed_methods.join(", ")
        };
        let mut resp = Response::new(full(Bytes::new()));
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        if let Ok(v) = HeaderValue::from_str(&allow_methods) {
            h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, v);
        }
        if !requested.is_empty()
            && let Ok(v) = HeaderValue::from_str(&requested.join(", "))
        {
            h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, v);
        }
        if self.allow_credentials {
            h.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        }
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(self.max_age_seconds));
        h.insert(header::VARY, HeaderValue::from_static(VARY_PREFLIGHT));
        Cors::Respond(resp)
    }

    /// Whether `origin` matches one of [`Self::allowed_origin_patterns`] (a trailing `/` is ignored).
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/');
        self.allowed_origin_patterns.iter().any(|p| origin_matches(p.trim().trim_end_matches('/'), origin))
    }

    fn method_allowed(&self, method: &str) -> bool {
        self.allowed_methods.iter().any(|m| m == "*" || m.eq_ignore_ascii_case(method))
    }
}

/// Adds the decoration headers to a response (`Vary` is appended, the others replace).
pub fn decorate(resp: &mut Response<BoxBody>, headers: Vec<(HeaderName, HeaderValue)>) {
    let h = resp.headers_mut();
    for (name, value) in headers {
        if name == header::VARY {
            h.append(name, value);
        } else {
            h.insert(name, value);
        }
    }
}

/// Adds `name` to a decorated response's `Access-Control-Expose-Headers` (a header a route's
/// browser clients must read, whatever the configured list says).
pub fn expose(resp: &mut Response<BoxBody>, name: &'static str) {
    let h = resp.headers_mut();
    let listed = h.get(header::ACCESS_CONTROL_EXPOSE_HEADERS).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let value = match listed {
        Some(list) if list.split(',').any(|n| n.trim().eq_ignore_ascii_case(name)) => return,
        Some(list) => format!("{list}, {name}"),
        None => name.to_owned(),
    };
    if let Ok(value) = HeaderValue::from_str(&value) {
        h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, value);
    }
}

fn reject() -> Cors {
    let mut resp = Response::new(full(Bytes::from_static(b"Invalid CORS request")));
    *resp.status_mut() = StatusCode::FORBIDDEN;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp.headers_mut().insert(header::VARY, HeaderValue::from_static(VARY_PREFLIGHT));
    Cors::Respond(resp)
}

/// `Origin` names this server (compared with `Host`, any scheme: TLS may end at a proxy).
pub(crate) fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let Some(host) = host else { return false };
    let Some((scheme, authority)) = origin.split_once("://") else { return false };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => ":80",
        "https" => ":443",
        _ => return false,
    };
    let strip = |s: &str| s.strip_suffix(default_port).unwrap_or(s).to_ascii_lowercase();
    strip(authority) == strip(host)
}

/// Spring-style origin pattern: `*` matches any run of characters; `:[*]` an optional port;
/// `:[80,8080]` one of the listed ports. ASCII case-insensitive. Stricter than Spring where it
/// matters: a `*` port (`http://localhost:*`) matches digits only, and only a well-formed origin
/// (`scheme://host[:port]`) matches any pattern but `*`, so neither
/// `http://localhost:3000.evil.com` nor `http://localhost:3000@evil.com` passes as localhost.
fn origin_matches(pattern: &str, origin: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let Some((host, port)) = split_origin(origin) else { return false };
    if let Some((base, ports)) = pattern.strip_suffix(']').and_then(|p| p.rsplit_once(":[")) {
        let port_ok = match (ports.trim(), port) {
            ("*", _) => true,
            (_, None) => false,
            (list, Some(port)) => list.split(',').any(|p| p.trim() == port),
        };
        return port_ok && wildcard(base, host, true);
    }
    if let Some(base) = pattern.strip_suffix(":*").filter(|b| b.contains("://")) {
        return port.is_some() && wildcard(base, host, true);
    }
    wildcard(pattern, origin, true)
}

/// A serialized origin split into `scheme://host` and its port, or `None` when it is not one:
/// anything beyond host name characters (`@`, `/`, `?`, spaces …) or a port that is not digits.
fn split_origin(origin: &str) -> Option<(&str, Option<&str>)> {
    let (scheme, authority) = origin.split_once("://")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (address, rest) = v6.split_once(']')?;
            let address_ok =
                !address.is_empty() && address.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
            (address_ok.then_some(&authority[..address.len() + 2])?, rest)
        }
        None => {
            let end = authority.find(':').unwrap_or(authority.len());
            let host = &authority[..end];
            let host_ok = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
            (host_ok.then_some(host)?, &authority[end..])
        }
    };
    let port = match port {
        "" => None,
        p => Some(p.strip_prefix(':').filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?),
    };
    scheme_ok.then_some((&origin[..scheme.len() + 3 + host.len()], port))
}

/// Ant-style path match: `**` spans segments, `*` / `?` stay inside one.
pub fn path_matches(pattern: &str, path: &str) -> bool {
    fn segments(p: &[&str], s: &[&str]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((&"**", rest)) => (0..=s.len()).any(|i| segments(rest, &s[i..])),
            Some((seg, rest)) => s.first().is_some_and(|first| wildcard(seg, first, false)) && segments(rest, &s[1..]),
        }
    }
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    segments(&p, &s)
}

/// `*` any run of characters, `?` exactly one.
fn wildcard(pattern: &str, text: &str, ignore_case: bool) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let eq = |a: char, b: char| if ignore_case { a.eq_ignore_ascii_case(&b) } else { a == b };
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && eq(p[pi], t[ti]))) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert!(path_matches("/api/ap/**", "/api/ap/query"));
        assert!(path_matches("/api/ap/**", "/api/ap/data/a/b.csv"));
        assert!(path_matches("/api/ap/**", "/api/ap"));
        assert!(!path_matches("/api/ap/**", "/healthz"));
        assert!(!path_matches("/api/ap/**", "/api/apx/query"));
        assert!(path_matches("/api/*/query", "/api/ap/query"));
        assert!(!path_matches("/api/*/query", "/api/ap/x/query"));
        assert!(path_matches("/**", "/anything/at/all"));
    }

    #[test]
    fn origins() {
        let c = CorsConfig::default();
        for allowed in [
            "http://localhost:5173",
            "HTTP://LOCALHOST:3000/",
            "http://localhost",
            "http://127.0.0.1:5173",
            "http://127.0.0.1",
            "http://[::1]:3000",
            "http://[::1]",
        ] {
            assert!(c.origin_allowed(allowed), "{allowed}");
        }
        for refused in [
            "https://localhost:5173",
            "http://evil.example",
            "http://localhost:3000.evil.com",
            "http://localhost:3000@evil.com",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "http://[::1].evil.example",
            "http://localhost:",
            "http://local host:80",
            "null",
        ] {
            assert!(!c.origin_allowed(refused), "{refused}");
        }
        assert!(origin_matches("https://*.example.com", "https://app.example.com"));
        assert!(!origin_matches("https://*.example.com", "https://example.org"));
        assert!(!origin_matches("https://*.example.com", "https://evil.com/.example.com"));
        assert!(origin_matches("http://localhost:[*]", "http://localhost"));
        assert!(origin_matches("http://localhost:[*]", "http://localhost:8080"));
        assert!(!origin_matches("http://localhost:[*]", "http://localhostx"));
        assert!(!origin_matches("http://localhost:[*]", "http://localhost:80x"));
        assert!(origin_matches("http://localhost:[3000,5173]", "http://localhost:5173"));
        assert!(!origin_matches("http://localhost:[3000,5173]", "http://localhost:8080"));
        assert!(!origin_matches("http://localhost:[3000,5173]", "http://localhost"));
        assert!(origin_matches("*", "null"));
    }

    #[test]
    fn a_star_port_matches_digits_only() {
        let p = "http://localhost:*";
        assert!(origin_matches(p, "http://localhost:3000"));
        assert!(!origin_matches(p, "http://localhost"), "a * port needs a port (:[*] makes it optional)");
        for evil in [
            "http://localhost:3000.evil.com",
            "http://localhost:3000@evil.com",
            "http://localhost:3000/evil",
            "http://localhost:x",
            "http://localhost:3000:4000",
        ] {
            assert!(!origin_matches(p, evil), "{evil}");
        }
        assert!(origin_matches("http://*:*", "http://gw.example:8080"));
        assert!(origin_matches("http://[::1]:*", "http://[::1]:8080"));
    }

    #[test]
    fn same_origin_detection() {
        assert!(same_origin("http://127.0.0.1:8080", Some("127.0.0.1:8080")));
        assert!(same_origin("https://gw.example", Some("gw.example")));
        assert!(same_origin("http://gw.example:80", Some("gw.example")));
        assert!(!same_origin("http://localhost:5173", Some("127.0.0.1:8080")));
        assert!(!same_origin("http://localhost:5173", None));
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("a*c", "abbbc", false));
        assert!(wildcard("*", "", false));
        assert!(!wildcard("a?c", "ac", false));
        assert!(wildcard("*.csv", "x.csv", false));
        assert!(!wildcard("ABC", "abc", false));
        assert!(wildcard("ABC", "abc", true));
    }
}
