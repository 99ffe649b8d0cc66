//! The Host allow-list (`server.allowed-hosts`), against DNS rebinding.
//!
//! A page on `evil.example` can make its name resolve to 127.0.0.1 and then talk to a gateway
//! on loopback as if it were its own server: the browser sends `Host: evil.example:8080` and
//! `Origin: http://evil.example:8080`, which CORS rightly takes for a same-origin request. So a
//! request whose `Host` (HTTP/1.1) or `:authority` (HTTP/2) names no expected host is refused
//! with 403 before anything else looks at it: CORS, auth, routing.
//!
//! The loopback names (`localhost`, `127.0.0.1`, `[::1]`, any port) are always accepted: a
//! rebinding page cannot send them, and local tools (`agw health`, probes) use them. Unset, the
//! list is just those when the server listens on a loopback address, and anything otherwise
//! (behind a proxy or in a container the public names are not known in advance).

use std::net::IpAddr;

use http::{Request, header};

use crate::envelope::ApiError;

/// Names that always pass: what a client on this machine uses.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Which `Host` values are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    /// Every host (`*` configured, or listening on a non-loopback address with nothing configured).
    Any,
    /// The loopback names plus these.
    Only(Vec<HostPattern>),
}

/// An entry of `server.allowed-hosts` that is not a host name (a URL, a path, a bracketed
/// wildcard); carries the entry, trimmed. The display text is the setting's error message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{entry:?} is not a host name (give names such as gw.example.com, gw.example.com:8443 or *.example.com)")]
pub struct NotAHost {
    entry: String,
}

/// One entry: a name (or `*.domain`: any name under it) and an optional port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lower-case; a leading `.` means "any name ending so" (from `*.domain`).
    name: String,
    port: Option<u16>,
}

impl AllowedHosts {
    /// From `server.allowed-hosts` (`None`: unset) and the address the server listens on.
    pub fn new(configured: Option<&[String]>, listen: IpAddr) -> Result<Self, NotAHost> {
        match configured {
            None if listen.is_loopback() => Ok(Self::Only(Vec::new())),
            None => Ok(Self::Any),
            Some(entries) if entries.iter().any(|e| e.trim() == "*") => Ok(Self::Any),
            Some(entries) => entries.iter().map(|e| HostPattern::parse(e)).collect::<Result<_, _>>().map(Self::Only),
        }
    }

    /// Whether a `Host` / `:authority` value names an allowed host.
    pub fn allows(&self, authority: &str) -> bool {
        let Self::Only(patterns) = self else { return true };
        let Some((name, port)) = split_authority(authority) else { return false };
        LOOPBACK_NAMES.contains(&name.as_str()) || patterns.iter().any(|p| p.matches(&name, port))
    }

    /// `Ok` when every authority the request carries is allowed (and it carries one).
    pub fn check<B>(&self, req: &Request<B>) -> Result<(), ApiError> {
        if *self == Self::Any {
            return Ok(());
        }
        let from_uri = req.uri().authority().map(|a| a.as_str());
        let headers = req.headers().get_all(header::HOST).iter().map(|h| h.to_str().unwrap_or("\u{fffd}"));
        let mut seen = false;
        for authority in from_uri.into_iter().chain(headers) {
            seen = true;
            if !self.allows(authority) {
                let shown: String = authority.chars().take(100).collect();
                return Err(ApiError::forbidden(format!("host not allowed: {shown}")));
            }
        }
        if seen { Ok(()) } else { Err(ApiError::forbidden("host not allowed: no Host header")) }
    }

    /// For the startup log.
    pub fn describe(&self) -> String {
        match self {
            Self::Any => "any".into(),
            Self::Only(patterns) => {
                let mut names: Vec<String> = LOOPBACK_NAMES.iter().map(|n| n.to_string()).collect();
                names.extend(patterns.iter().map(HostPattern::to_string));
                names.join(", ")
            }
        }
    }
}

impl HostPattern {
    fn parse(entry: &str) -> Result<Self, NotAHost> {
        let entry = entry.trim();
        let not_a_host = || NotAHost { entry: entry.to_owned() };
        let (wildcard, rest) = match entry.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, entry),
        };
        let (name, port) = split_authority(rest).ok_or_else(not_a_host)?;
        if wildcard && name.starts_with('[') {
            return Err(not_a_host());
        }
        Ok(Self { name: if wildcard { format!(".{name}") } else { name }, port })
    }

    fn matches(&self, name: &str, port: Option<u16>) -> bool {
        let name_ok = match self.name.strip_prefix('.') {
            Some(domain) => name.strip_suffix(domain).is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => self.name == name,
        };
        name_ok && (self.port.is_none() || self.port == port)
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name.strip_prefix('.') {
            Some(domain) => write!(f, "*.{domain}")?,
            None => f.write_str(&self.name)?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// `host[:port]` → the host, lower-cased without a trailing dot, and the port. `None` for
/// anything that is not a plain authority (user info, paths, spaces, a non-numeric port …).
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (address, rest) = v6.split_once(']')?;
            if address.is_empty() || !address.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.') {
                return None;
            }
            (&authority[..address.len() + 2], rest)
        }
        None => {
            let end = authority.find(':').unwrap_or(authority.len());
            let host = &authority[..end];
            if host.is_empty() || !host.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)) {
                return None;
            }
            (host, &authority[end..])
        }
    };
    let port = match port {
        "" => None,
        p => Some(p.strip_prefix(':')?.parse::<u16>().ok()?),
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    (!host.is_empty()).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(entries: &[&str]) -> AllowedHosts {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        AllowedHosts::new(Some(&entries), IpAddr::from([127, 0, 0, 1])).unwrap()
    }

    #[test]
    fn defaults_follow_the_listen_address() {
        let loopback = AllowedHosts::new(None, IpAddr::from([127, 0, 0, 1])).unwrap();
        for ok in ["localhost:8080", "127.0.0.1:1", "[::1]:8080", "LOCALHOST", "localhost.:80", "127.0.0.1"] {
            assert!(loopback.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io:8080",
            "user@localhost:8080",
            "localhost:8080/x",
            "localhost:99999",
            "localhost:",
            "",
        ] {
            assert!(!loopback.allows(refused), "{refused}");
        }
        assert_eq!(AllowedHosts::new(None, "::1".parse().unwrap()).unwrap(), AllowedHosts::Only(Vec::new()));
        assert_eq!(AllowedHosts::new(None, IpAddr::from([0, 0, 0, 0])).unwrap(), AllowedHosts::Any);
        assert_eq!(only(&["gw.example", "*"]), AllowedHosts::Any);
    }

    #[test]
    fn configured_names_ports_and_subdomains() {
        let hosts = only(&["gw.example.com", "*.corp.example:8443", "[fd00::1]"]);
        for ok in ["gw.example.com", "GW.example.com:1234", "a.corp.example:8443", "a.b.corp.example:8443"] {
            assert!(hosts.allows(ok), "{ok}");
        }
        assert!(hosts.allows("[fd00::1]:80") && hosts.allows("localhost:8080"));
        for refused in ["corp.example:8443", "a.corp.example:9999", "a.corp.example", "xcorp.example:8443", "evil.com"]
        {
            assert!(!hosts.allows(refused), "{refused}");
        }
        assert_eq!(hosts.describe(), "localhost, 127.0.0.1, [::1], gw.example.com, *.corp.example:8443, [fd00::1]");
        let bad = AllowedHosts::new(Some(&["http://gw.example".to_string()]), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(
            bad.unwrap_err().to_string(),
            "\"http://gw.example\" is not a host name (give names such as gw.example.com, gw.example.com:8443 or \
             *.example.com)"
        );
    }
}
