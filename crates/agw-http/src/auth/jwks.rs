//! The JWKS key set: fetched lazily (http, https or `file:`), cached, refreshed when stale or when a
//! token names an unknown `kid`, and kept when a refresh fails.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use jsonwebtoken::DecodingKey;
use serde_json::Value;
use tokio::sync::Mutex;

/// Shortest cache lifetime, whatever `agent.auth.jwks-cache-seconds` says.
pub const MIN_CACHE: Duration = Duration::from_secs(30);
/// Largest JWKS document read.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the set comes from.
#[derive(Debug, Clone)]
pub enum JwksSource {
    /// An `http:` or `https:` URL, fetched and cached.
    Http(reqwest::Url),
    /// A `file:` URL, read from disk.
    File(PathBuf),
}

/// Why a JWKS URI is not a place [`JwksSource`] can read a key set from. The display text is what
/// the `agent.auth.jwks-uri` configuration error says after the setting's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksUriError {
    /// Not a URL at all.
    #[error("{uri:?} is not a URL: {reason}")]
    NotAUrl {
        /// The URI as given.
        uri: String,
        /// The URL parser's description.
        reason: String,
    },
    /// A `file:` URL that names no local path.
    #[error("{uri:?} is not a usable file: URL")]
    NotAFilePath {
        /// The URI as given.
        uri: String,
    },
    /// A scheme other than `http`, `https` and `file`.
    #[error("{uri:?}: unsupported scheme {scheme:?} (use http, https or file)")]
    UnsupportedScheme {
        /// The URI as given.
        uri: String,
        /// Its scheme.
        scheme: String,
    },
}

impl JwksSource {
    /// Accepts `http:`, `https:` and `file:` URLs.
    pub fn parse(uri: &str) -> Result<Self, JwksUriError> {
        let url = reqwest::Url::parse(uri)
            .map_err(|e| JwksUriError::NotAUrl { uri: uri.to_owned(), reason: e.to_string() })?;
        match url.scheme() {
            "http" | "https" => Ok(Self::Http(url)),
            "file" => {
                url.to_file_path().map(Self::File).map_err(|()| JwksUriError::NotAFilePath { uri: uri.to_owned() })
            }
            other => Err(JwksUriError::UnsupportedScheme { uri: uri.to_owned(), scheme: other.to_owned() }),
        }
    }
}

impl std::fmt::Display for JwksSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Http(url) => write!(f, "{url}"),
            Self::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

/// One usable key of the set.
struct SetKey {
    kid: Option<String>,
    key: DecodingKey,
}

/// A snapshot of the set.
#[derive(Default)]
pub(crate) struct KeySet {
    keys: Vec<SetKey>,
    /// When this set was fetched; `None` before the first successful fetch.
    fetched_at: Option<Instant>,
}

impl KeySet {
    fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }

    /// The keys to try for a token: those whose `kid` matches, else every key.
    pub fn candidates<'a>(&'a self, kid: Option<&str>) -> Vec<&'a DecodingKey> {
        let matching: Vec<_> = match kid {
            Some(kid) => self.keys.iter().filter(|k| k.kid.as_deref() == Some(kid)).map(|k| &k.key).collect(),
            None => Vec::new(),
        };
        if matching.is_empty() { self.keys.iter().map(|k| &k.key).collect() } else { matching }
    }

    fn len(&self) -> usize {
        self.keys.len()
    }
}

/// Fetch bookkeeping, behind the lock that makes fetches single-flight.
#[derive(Default)]
struct FetchState {
    last_attempt: Option<Instant>,
    client: Option<reqwest::Client>,
}

pub(crate) struct JwksCache {
    source: JwksSource,
    ttl: Duration,
    /// Least time between two fetches (bounds what a flood of unknown-`kid` tokens can cause).
    min_refetch: Duration,
    current: ArcSwap<KeySet>,
    fetch: Mutex<FetchState>,
}

impl JwksCache {
    pub fn new(source: JwksSource, cache_seconds: u64, min_refetch: Duration) -> Self {
        Self {
            source,
            ttl: Duration::from_secs(cache_seconds).max(MIN_CACHE),
            min_refetch,
            current: ArcSwap::from_pointee(KeySet::default()),
            fetch: Mutex::new(FetchState::default()),
        }
    }

    /// The set to verify a token with `kid` against: the cached one while it is fresh and knows the
    /// `kid`, else a refetched one (when the rate limit allows), else the stale one.
    pub async fn keys(&self, kid: Option<&str>) -> Arc<KeySet> {
        let snapshot = self.current.load_full();
        if self.usable(&snapshot, kid) {
            return snapshot;
        }
        let mut state = match self.fetch.try_lock() {
            Ok(state) => state,
            // A fetch is under way: a set that knows the kid serves (stale) meanwhile rather than
            // making every request wait for a slow JWKS server.
            Err(_) if snapshot.fetched_at.is_some() && kid.is_none_or(|kid| snapshot.has_kid(kid)) => {
                return snapshot;
            }
            Err(_) => self.fetch.lock().await,
        };
        // Another request may have refreshed the set while this one waited for the lock.
        let snapshot = self.current.load_full();
        if self.usable(&snapshot, kid) {
            return snapshot;
        }
        if state.last_attempt.is_some_and(|t| t.elapsed() < self.min_refetch) {
            return snapshot;
        }
        state.last_attempt = Some(Instant::now());
        match self.fetch(&mut state).await {
            Ok(keys) => {
                tracing::info!(source = %self.source, keys = keys.len(), "JWKS fetched");
                let fresh = Arc::new(KeySet { keys, fetched_at: Some(Instant::now()) });
                self.current.store(fresh.clone());
                fresh
            }
            Err(e) => {
                tracing::warn!(source = %self.source, error = %e, stale_keys = snapshot.len(), "JWKS fetch failed");
                snapshot
            }
        }
    }

    fn usable(&self, set: &KeySet, kid: Option<&str>) -> bool {
        let fresh = set.fetched_at.is_some_and(|t| t.elapsed() < self.ttl);
        fresh && kid.is_none_or(|kid| set.has_kid(kid))
    }

    async fn fetch(&self, state: &mut FetchState) -> Result<Vec<SetKey>, String> {
        let bytes = match &self.source {
            JwksSource::File(path) => tokio::fs::read(path).await.map_err(|e| e.to_string())?,
            JwksSource::Http(url) => {
                let client = match &state.client {
                    Some(c) => c.clone(),
                    None => {
                        let c = reqwest::Client::builder()
                            .connect_timeout(CONNECT_TIMEOUT)
                            .timeout(REQUEST_TIMEOUT)
                            .build()
                            .map_err(|e| format!("HTTP client: {e}"))?;
                        state.client = Some(c.clone());
                        c
                    }
                };
                let mut resp = client.get(url.clone()).send().await.map_err(|e| e.to_string())?;
                if !resp.status().is_success() {
                    return Err(format!("HTTP {}", resp.status()));
                }
                let mut body = Vec::new();
                while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
                    if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                        return Err(format!("document larger than {MAX_DOCUMENT_BYTES} bytes"));
                    }
                    body.extend_from_slice(&chunk);
                }
                body
            }
        };
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("document larger than {MAX_DOCUMENT_BYTES} bytes"));
        }
        parse_set(&bytes)
    }
}

/// The RSA signing keys of a JWKS document; other keys are skipped.
fn parse_set(bytes: &[u8]) -> Result<Vec<SetKey>, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let keys = doc.get("keys").and_then(Value::as_array).ok_or("no \"keys\" array")?;
    let mut out = Vec::new();
    for jwk in keys {
        let field = |name: &str| jwk.get(name).and_then(Value::as_str);
        if field("kty") != Some("RSA") || field("use").is_some_and(|u| u != "sig") {
            continue;
        }
        let (Some(n), Some(e)) = (field("n"), field("e")) else { continue };
        match DecodingKey::from_rsa_components(n, e) {
            Ok(key) => out.push(SetKey { kid: field("kid").map(str::to_string), key }),
            Err(err) => tracing::debug!(kid = ?field("kid"), error = %err, "JWKS key skipped"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources() {
        assert!(matches!(JwksSource::parse("https://idp.example/jwks.json").unwrap(), JwksSource::Http(_)));
        assert!(
            matches!(JwksSource::parse("file:///etc/agw/jwks.json").unwrap(), JwksSource::File(p) if p == std::path::Path::new("/etc/agw/jwks.json"))
        );
        assert_eq!(
            JwksSource::parse("ftp://x/y").unwrap_err().to_string(),
            "\"ftp://x/y\": unsupported scheme \"ftp\" (use http, https or file)"
        );
        assert!(JwksSource::parse("not a url").is_err());
    }

    #[tokio::test]
    async fn stale_set_is_kept_when_a_refresh_fails() {
        let dir = std::env::temp_dir().join(format!("agw-jwks-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("jwks.json");
        std::fs::write(&file, r#"{"keys":[{"kty":"RSA","kid":"a","n":"sXch","e":"AQAB"}]}"#).unwrap();
        let cache = JwksCache::new(JwksSource::File(file.clone()), 60, Duration::ZERO);
        assert_eq!(cache.keys(Some("a")).await.len(), 1);
        // The source breaks and the cached set expires: the stale set still serves.
        std::fs::write(&file, "not json").unwrap();
        let expired = Instant::now().checked_sub(Duration::from_secs(120)).unwrap();
        let stale = KeySet {
            keys: parse_set(br#"{"keys":[{"kty":"RSA","kid":"a","n":"sXch","e":"AQAB"}]}"#).unwrap(),
            fetched_at: Some(expired),
        };
        cache.current.store(Arc::new(stale));
        let set = cache.keys(Some("a")).await;
        assert_eq!(set.len(), 1);
        assert_eq!(set.fetched_at, Some(expired), "kept as it was");
        // Never fetched and the source unreadable: no keys.
        std::fs::remove_file(&file).unwrap();
        let empty = JwksCache::new(JwksSource::File(file), 60, Duration::ZERO);
        assert_eq!(empty.keys(None).await.len(), 0);
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn only_rsa_signing_keys_are_kept_and_kid_picks_candidates() {
        let doc = br#"{"keys":[
            {"kty":"RSA","kid":"a","n":"sXch","e":"AQAB"},
            {"kty":"RSA","kid":"b","use":"sig","n":"sXch","e":"AQAB"},
            {"kty":"RSA","kid":"enc","use":"enc","n":"sXch","e":"AQAB"},
            {"kty":"EC","kid":"ec","crv":"P-256","x":"AA","y":"AA"},
            {"kty":"RSA","kid":"broken","n":"!!","e":"AQAB"},
            {"kty":"RSA","n":"sXch"}
        ]}"#;
        let set = KeySet { keys: parse_set(doc).unwrap(), fetched_at: None };
        assert_eq!(set.len(), 2);
        assert_eq!(set.candidates(Some("b")).len(), 1);
        assert_eq!(set.candidates(Some("zzz")).len(), 2, "unknown kid: every key is tried");
        assert_eq!(set.candidates(None).len(), 2);
        assert!(parse_set(b"{}").is_err());
        assert!(parse_set(b"nope").is_err());
    }
}
