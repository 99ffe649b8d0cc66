//! JWT bearer auth over real HTTP: keys generated here (aws-lc-rs, the crypto library the
//! workspace already builds), tokens signed here, a JWKS served on loopback by a tiny hyper server.

mod common;

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agw_http::Settings;
use agw_testkit::Transcript;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{self, KeyPair as _};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use common::{Gateway, oneshot_agent, read_stream};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

const ISSUER: &str = "https://idp.test";

// ---------------------------------------------------------------- keys and tokens

struct TestKey {
    pair: KeyPair,
    kid: String,
}

impl TestKey {
    fn generate(kid: &str) -> Self {
        Self { pair: KeyPair::generate(KeySize::Rsa2048).expect("RSA key generation"), kid: kid.into() }
    }

    /// `-----BEGIN PUBLIC KEY-----` (SubjectPublicKeyInfo) PEM.
    fn public_pem(&self) -> String {
        let der = self.pair.public_key().as_der().expect("SPKI DER");
        let b64 = STANDARD.encode(der.as_ref());
        let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
        format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", lines.join("\n"))
    }

    fn jwk(&self) -> Value {
        let public = self.pair.public_key();
        json!({
            "kty": "RSA",
            "kid": self.kid,
            "use": "sig",
            "alg": "RS256",
            "n": URL_SAFE_NO_PAD.encode(public.modulus().big_endian_without_leading_zero()),
            "e": URL_SAFE_NO_PAD.encode(public.exponent().big_endian_without_leading_zero()),
        })
    }

    /// A compact JWS with this header and these claims, signed per the header's `alg`.
    fn sign(&self, header: &Value, claims: &Value) -> String {
        let input = signing_input(header, claims);
        let alg: &'static dyn signature::RsaEncoding = match header["alg"].as_str().unwrap() {
            "RS256" => &signature::RSA_PKCS1_SHA256,
            "RS512" => &signature::RSA_PKCS1_SHA512,
            "PS256" => &signature::RSA_PSS_SHA256,
            other => panic!("test signs no {other}"),
        };
        let mut sig = vec![0; self.pair.public_modulus_len()];
        self.pair.sign(alg, &SystemRandom::new(), input.as_bytes(), &mut sig).expect("sign");
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    /// RS256 with this key's `kid`.
    fn token(&self, claims: &Value) -> String {
        self.sign(&json!({"alg": "RS256", "typ": "JWT", "kid": self.kid}), claims)
    }
}

fn signing_input(header: &Value, claims: &Value) -> String {
    format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()))
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Valid claims: `sub`, `iss`, `iat`, `exp` five minutes ahead; `extra` overrides or (with null) removes.
fn claims(extra: Value) -> Value {
    let mut c = json!({"sub": "alice", "iss": ISSUER, "iat": now(), "exp": now() + 300});
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c
}

// ---------------------------------------------------------------- JWKS server on loopback

struct JwksServer {
    url: String,
    doc: Arc<Mutex<Value>>,
    hits: Arc<AtomicUsize>,
}

impl JwksServer {
    async fn start(keys: &[&TestKey]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/.well-known/jwks.json", listener.local_addr().unwrap());
        let doc = Arc::new(Mutex::new(jwks(keys)));
        let hits = Arc::new(AtomicUsize::new(0));
        let (doc2, hits2) = (doc.clone(), hits.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (doc, hits) = (doc2.clone(), hits2.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |_req| {
                        hits.fetch_add(1, Ordering::SeqCst);
                        let body = doc.lock().unwrap().to_string();
                        async move {
                            let mut resp = http::Response::new(Full::new(Bytes::from(body)));
                            resp.headers_mut().insert("content-type", "application/json".parse().unwrap());
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { url, doc, hits }
    }

    fn publish(&self, keys: &[&TestKey]) {
        *self.doc.lock().unwrap() = jwks(keys);
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

fn jwks(keys: &[&TestKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})
}

// ---------------------------------------------------------------- helpers

fn local_key_env(pem: &str) -> Vec<(&'static str, String)> {
    vec![("SERVER_ADDRESS", "127.0.0.1".into()), ("AGENT_AUTH_LOCAL_PUBLIC_KEY", pem.to_string())]
}

fn jwks_env(url: &str, refetch: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SERVER_ADDRESS", "127.0.0.1".into()),
        ("AGENT_AUTH_JWKS_URI", url.to_string()),
        ("AGENT_AUTH_ISSUER", ISSUER.into()),
        ("AGENT_AUTH_JWKS_CACHE_SECONDS", "300".into()),
        ("AGW_AUTH_JWKS_REFETCH_INTERVAL", refetch.into()),
    ]
}

async fn start(env: &[(&'static str, String)]) -> Gateway {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Gateway::start(&[oneshot_agent("a", false, 5000)], &env).await
}

/// `GET /api/ap/agents` with this `Authorization` value (none when `None`): status and JSON body.
async fn agents(gw: &Gateway, authorization: Option<&str>) -> (u16, Value) {
    let mut req = gw.client.get(format!("{}/api/ap/agents", gw.base));
    if let Some(value) = authorization {
        req = req.header("authorization", value);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    if status == 401 {
        assert_eq!(resp.headers()["content-type"], "application/json");
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    }
    (status, resp.json().await.unwrap())
}

async fn with_token(gw: &Gateway, token: &str) -> (u16, Value) {
    agents(gw, Some(&format!("Bearer {token}"))).await
}

/// Asserts the exact 401 envelope, and that the token is not echoed.
async fn assert_rejected(gw: &Gateway, token: &str, reason: &str) {
    let (status, body) = with_token(gw, token).await;
    assert_eq!(status, 401, "{reason}: {body}");
    assert_eq!(body, json!({"code": 401, "msg": format!("unauthorized: {reason}"), "data": {}}));
    for part in token.split('.').filter(|p| p.len() > 8) {
        assert!(!body.to_string().contains(part), "the token must not be echoed: {body}");
    }
}

// ---------------------------------------------------------------- local key

#[tokio::test]
async fn local_key_accepts_valid_tokens() {
    let key = TestKey::generate("local");
    let gw = start(&local_key_env(&key.public_pem())).await;

    let (status, body) = with_token(&gw, &key.token(&claims(json!({})))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["code"], 0);
    // Other RSA algorithms, no kid, and an `iss` nobody asked about are fine.
    for alg in ["RS512", "PS256"] {
        let token = key.sign(&json!({"alg": alg}), &claims(json!({"iss": "whoever"})));
        assert_eq!(with_token(&gw, &token).await.0, 200, "{alg}");
    }
    // Within the leeway (5 s): just expired, or not quite valid yet.
    assert_eq!(with_token(&gw, &key.token(&claims(json!({"exp": now() - 2})))).await.0, 200);
    assert_eq!(with_token(&gw, &key.token(&claims(json!({"nbf": now() + 2})))).await.0, 200);
    // The scheme's token may carry surrounding spaces.
    assert_eq!(agents(&gw, Some(&format!("Bearer   {}  ", key.token(&claims(json!({})))))).await.0, 200);
}

#[tokio::test]
async fn local_key_rejects_every_forgery_with_the_envelope() {
    let key = TestKey::generate("local");
    let pem = key.public_pem();
    let gw = start(&local_key_env(&pem)).await;
    let good = claims(json!({}));

    // No header, another scheme, an empty bearer.
    let (status, body) = agents(&gw, None).await;
    assert_eq!(status, 401);
    assert_eq!(body, json!({"code": 401, "msg": "unauthorized: missing bearer token", "data": {}}));
    let (status, body) = agents(&gw, Some("Basic YWxpY2U6c2VjcmV0")).await;
    assert_eq!(status, 401);
    assert_eq!(body["msg"], "unauthorized: authorization scheme must be Bearer");
    let (status, body) = agents(&gw, Some(&format!("bearer {}", key.token(&good)))).await;
    assert_eq!((status, body["msg"].as_str().unwrap()), (401, "unauthorized: authorization scheme must be Bearer"));
    let (status, body) = agents(&gw, Some("Bearer ")).await;
    assert_eq!((status, body["msg"].as_str().unwrap()), (401, "unauthorized: missing bearer token"));
    assert_rejected(&gw, "not-a-jwt", "malformed token").await;

    // alg: none — unsigned, empty signature.
    let none = format!("{}.", signing_input(&json!({"alg": "none", "typ": "JWT"}), &good));
    assert_rejected(&gw, &none, "unsupported algorithm none").await;
    // alg: none with the signature of a real token attached.
    let real_sig = key.token(&good).rsplit('.').next().unwrap().to_string();
    let none_signed = format!("{}.{real_sig}", signing_input(&json!({"alg": "none"}), &good));
    assert_rejected(&gw, &none_signed, "unsupported algorithm none").await;

    // HS256 with the public key PEM as the HMAC secret (the classic key-confusion attack).
    let input = signing_input(&json!({"alg": "HS256", "typ": "JWT"}), &good);
    let tag = aws_lc_rs::hmac::sign(
        &aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, pem.as_bytes()),
        input.as_bytes(),
    );
    let hs256 = format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()));
    assert_rejected(&gw, &hs256, "unsupported algorithm HS256").await;

    // Time.
    assert_rejected(&gw, &key.token(&claims(json!({"exp": now() - 60}))), "token expired").await;
    assert_rejected(&gw, &key.token(&claims(json!({"nbf": now() + 60}))), "token not yet valid").await;
    assert_rejected(&gw, &key.token(&claims(json!({"exp": null}))), "missing exp claim").await;

    // Tampered payload: new claims, the original signature.
    let original = key.token(&good);
    let parts: Vec<&str> = original.split('.').collect();
    let tampered_claims = URL_SAFE_NO_PAD.encode(claims(json!({"sub": "admin"})).to_string());
    let tampered = format!("{}.{tampered_claims}.{}", parts[0], parts[2]);
    assert_rejected(&gw, &tampered, "invalid signature").await;

    // Signed by a key the server does not know.
    let stranger = TestKey::generate("local");
    assert_rejected(&gw, &stranger.token(&good), "invalid signature").await;

    // Subject.
    assert_rejected(&gw, &key.token(&claims(json!({"sub": null}))), "missing sub claim").await;
    assert_rejected(&gw, &key.token(&claims(json!({"sub": "   "}))), "missing sub claim").await;

    // Unknown critical header extension.
    let crit = key.sign(&json!({"alg": "RS256", "crit": ["exp"], "exp": 1}), &good);
    assert_rejected(&gw, &crit, "unsupported critical header").await;
}

#[tokio::test]
async fn operations_endpoints_and_preflights_need_no_token() {
    let key = TestKey::generate("local");
    let gw = start(&local_key_env(&key.public_pem())).await;

    for path in ["/healthz", "/readyz"] {
        let resp = gw.client.get(format!("{}{path}", gw.base)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    // A CORS preflight never carries a token.
    let resp = gw
        .client
        .request(reqwest::Method::OPTIONS, format!("{}/api/ap/query", gw.base))
        .header("origin", "http://localhost:5173")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization, content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["access-control-allow-origin"], "http://localhost:5173");
    assert_eq!(resp.headers()["access-control-allow-headers"], "authorization, content-type");
    // Any OPTIONS passes auth (it is then routed: no OPTIONS handler → 405).
    let resp = gw.client.request(reqwest::Method::OPTIONS, format!("{}/api/ap/agents", gw.base)).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    // A 401 to an allowed cross-origin caller carries the CORS headers, so the page can read it.
    let resp = gw
        .client
        .get(format!("{}/api/ap/agents", gw.base))
        .header("origin", "http://localhost:5173")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["access-control-allow-origin"], "http://localhost:5173");
    // Unknown paths under /api/ap/ are behind auth too (no route probing without a token).
    let resp = gw.client.get(format!("{}/api/ap/nothing-here", gw.base)).send().await.unwrap();
    assert_eq!(resp.status(), 401);
}

#[tokio::test]
async fn streamed_query_with_a_valid_token_works_end_to_end() {
    let key = TestKey::generate("local");
    let gw = start(&local_key_env(&key.public_pem())).await;
    gw.fixture.set_default(Transcript::openai_text(&["Hello", " there"]));
    let body = json!({"agentKey": "a", "message": "hi"});

    let resp = gw.client.post(format!("{}/api/ap/query", gw.base)).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(gw.fixture.request_count(), 0, "nothing reaches the provider without a token");

    let resp = gw
        .client
        .post(format!("{}/api/ap/query", gw.base))
        .bearer_auth(key.token(&claims(json!({}))))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let stream = read_stream(resp).await;
    let deltas: Vec<&str> = stream.of_type("content.delta").iter().map(|e| e["delta"].as_str().unwrap()).collect();
    assert_eq!(deltas, ["Hello", " there"]);
    assert_eq!(stream.last()["type"], "run.complete");
}

// ---------------------------------------------------------------- JWKS

#[tokio::test]
async fn jwks_accepts_by_kid_and_checks_the_issuer() {
    let a = TestKey::generate("key-a");
    let jwks = JwksServer::start(&[&a]).await;
    let gw = start(&jwks_env(&jwks.url, "5s")).await;
    assert_eq!(jwks.hits(), 0, "the JWKS is fetched lazily");

    assert_eq!(with_token(&gw, &a.token(&claims(json!({})))).await.0, 200);
    assert_eq!(jwks.hits(), 1);
    // No kid: every key is tried.
    assert_eq!(with_token(&gw, &a.sign(&json!({"alg": "RS256"}), &claims(json!({})))).await.0, 200);
    // Cached: no refetch for known kids.
    assert_eq!(with_token(&gw, &a.token(&claims(json!({"sub": "bob"})))).await.0, 200);
    assert_eq!(jwks.hits(), 1);

    assert_rejected(&gw, &a.token(&claims(json!({"iss": "https://evil.test"}))), "invalid issuer").await;
    assert_rejected(&gw, &a.token(&claims(json!({"iss": "https://idp.test/"}))), "invalid issuer").await;
    assert_rejected(&gw, &a.token(&claims(json!({"iss": null}))), "missing iss claim").await;
    assert_rejected(&gw, &a.token(&claims(json!({"exp": now() - 60}))), "token expired").await;

    // An unknown kid whose key the JWKS does not have: refetch finds nothing, every key fails.
    let stranger = TestKey::generate("key-x");
    assert_rejected(&gw, &stranger.token(&claims(json!({}))), "invalid signature").await;
    // The stranger claiming a known kid fares no better.
    let forged = TestKey::generate("key-a");
    assert_rejected(&gw, &forged.token(&claims(json!({}))), "invalid signature").await;
}

#[tokio::test]
async fn key_rotation_by_kid_refetches_the_jwks() {
    let a = TestKey::generate("key-a");
    let b = TestKey::generate("key-b");
    let jwks = JwksServer::start(&[&a]).await;
    let gw = start(&jwks_env(&jwks.url, "0ms")).await;

    assert_eq!(with_token(&gw, &a.token(&claims(json!({})))).await.0, 200);
    assert_eq!(jwks.hits(), 1);
    // Before the rotation B is unknown (and the refetch does not find it).
    assert_rejected(&gw, &b.token(&claims(json!({}))), "invalid signature").await;
    assert_eq!(jwks.hits(), 2);

    // The identity provider rotates in key B; a token with kid B triggers a refetch, well before
    // the cache expires.
    jwks.publish(&[&a, &b]);
    assert_eq!(with_token(&gw, &b.token(&claims(json!({})))).await.0, 200);
    assert_eq!(jwks.hits(), 3);
    // Both keys now served from the cache.
    assert_eq!(with_token(&gw, &a.token(&claims(json!({})))).await.0, 200);
    assert_eq!(with_token(&gw, &b.token(&claims(json!({})))).await.0, 200);
    assert_eq!(jwks.hits(), 3);
}

#[tokio::test]
async fn unknown_kids_cannot_hammer_the_jwks_server() {
    let a = TestKey::generate("key-a");
    let jwks = JwksServer::start(&[&a]).await;
    let gw = start(&jwks_env(&jwks.url, "5s")).await;
    assert_eq!(with_token(&gw, &a.token(&claims(json!({})))).await.0, 200);

    let stranger = TestKey::generate("unused");
    let mut rejected = Vec::new();
    for i in 0..20 {
        let token = stranger.sign(&json!({"alg": "RS256", "kid": format!("bogus-{i}")}), &claims(json!({})));
        rejected.push(with_token(&gw, &token).await.0);
    }
    assert!(rejected.iter().all(|s| *s == 401));
    assert!(jwks.hits() <= 2, "refetches are rate-limited: {} fetches", jwks.hits());
}

#[tokio::test]
async fn jwks_from_a_file_url_and_local_key_first() {
    let a = TestKey::generate("key-a");
    let local = TestKey::generate("local");
    let dir = std::env::temp_dir().join(format!("agw-auth-jwks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("jwks.json");
    std::fs::write(&file, jwks(&[&a]).to_string()).unwrap();
    let mut env = jwks_env(&format!("file://{}", file.display()), "5s");
    env.push(("AGENT_AUTH_LOCAL_PUBLIC_KEY", local.public_pem()));
    let gw = start(&env).await;

    assert_eq!(with_token(&gw, &a.token(&claims(json!({})))).await.0, 200, "JWKS key from file:");
    assert_eq!(with_token(&gw, &local.token(&claims(json!({})))).await.0, 200, "local key");
    // The issuer applies whichever key verifies.
    assert_rejected(&gw, &local.token(&claims(json!({"iss": "https://evil.test"}))), "invalid issuer").await;
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn unreachable_jwks_leaves_the_local_key_working() {
    let local = TestKey::generate("local");
    // A port with nothing listening.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut env = jwks_env(&format!("http://{closed}/jwks.json"), "5s");
    env.push(("AGENT_AUTH_LOCAL_PUBLIC_KEY", local.public_pem()));
    let gw = start(&env).await;

    assert_eq!(with_token(&gw, &local.token(&claims(json!({})))).await.0, 200);
    let other = TestKey::generate("key-a");
    assert_rejected(&gw, &other.token(&claims(json!({}))), "invalid signature").await;
}

#[tokio::test]
async fn jwks_only_and_unreachable_says_no_key_is_available() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let gw = start(&jwks_env(&format!("http://{closed}/jwks.json"), "5s")).await;
    let key = TestKey::generate("key-a");
    assert_rejected(&gw, &key.token(&claims(json!({}))), "no signing key available").await;
}

// ---------------------------------------------------------------- without auth

#[tokio::test]
async fn without_a_key_source_requests_need_no_token() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    assert!(gw.base.starts_with("http://127.0.0.1:"), "no auth → loopback: {}", gw.base);
    assert_eq!(agents(&gw, None).await.0, 200);
    assert_eq!(agents(&gw, Some("Bearer whatever")).await.0, 200, "a token is ignored, not checked");
}

#[tokio::test]
async fn explicitly_disabled_auth_ignores_configured_keys() {
    let key = TestKey::generate("local");
    let mut env = local_key_env(&key.public_pem());
    env.push(("AGENT_AUTH_ENABLED", "false".into()));
    let gw = start(&env).await;
    assert_eq!(agents(&gw, None).await.0, 200);
}

// ---------------------------------------------------------------- startup validation

fn load(pairs: &[(&str, &str)]) -> Result<Settings, String> {
    Settings::load(None, pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()))).map_err(|e| e.to_string())
}

#[test]
fn misconfiguration_fails_at_startup_naming_the_setting() {
    let together =
        "agent.auth.jwks-uri, agent.auth.issuer and agent.auth.jwks-cache-seconds must be configured together";
    for partial in [
        vec![("AGENT_AUTH_JWKS_URI", "http://127.0.0.1:1/jwks.json")],
        vec![("AGENT_AUTH_ISSUER", ISSUER)],
        vec![("AGENT_AUTH_JWKS_CACHE_SECONDS", "60")],
        vec![("AGENT_AUTH_JWKS_URI", "http://127.0.0.1:1/jwks.json"), ("AGENT_AUTH_ISSUER", ISSUER)],
    ] {
        let err = load(&partial).unwrap_err();
        assert!(err.starts_with(together), "{partial:?}: {err}");
    }
    let full = |cache: &'static str| {
        vec![
            ("AGENT_AUTH_JWKS_URI", "http://127.0.0.1:1/jwks.json"),
            ("AGENT_AUTH_ISSUER", ISSUER),
            ("AGENT_AUTH_JWKS_CACHE_SECONDS", cache),
        ]
    };
    for bad in ["0", "-5"] {
        let err = load(&full(bad)).unwrap_err();
        assert!(err.starts_with("agent.auth.jwks-cache-seconds must be greater than 0"), "{err}");
    }
    let err = load(&full("soon")).unwrap_err();
    assert!(err.contains("agent.auth.jwks-cache-seconds"), "{err}");
    let mut gopher = full("60");
    gopher[0].1 = "gopher://idp.test/jwks";
    let err = load(&gopher).unwrap_err();
    assert!(err.contains("agent.auth.jwks-uri"), "{err}");

    let invalid = "agent.auth.local-public-key is not a valid PEM RSA public key";
    let key = TestKey::generate("k");
    let private_pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
        STANDARD.encode(key.pair.as_der().unwrap().as_ref())
    );
    let mangled = key.public_pem().replacen("MII", "MIX", 1);
    for pem in ["hello", private_pem.as_str(), mangled.as_str()] {
        let err = load(&[("AGENT_AUTH_LOCAL_PUBLIC_KEY", pem)]).unwrap_err();
        assert!(err.starts_with(invalid), "{err}");
        assert!(!err.contains("MII"), "the key is not echoed: {err}");
    }

    // The file form: blank, unreadable, valid.
    let dir = std::env::temp_dir().join(format!("agw-auth-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let blank = dir.join("blank.pem");
    std::fs::write(&blank, "\n  \n").unwrap();
    let err = load(&[("AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE", blank.to_str().unwrap())]).unwrap_err();
    assert!(err.starts_with("agent.auth.local-public-key cannot be blank"), "{err}");
    let err = load(&[("AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE", dir.join("missing.pem").to_str().unwrap())]).unwrap_err();
    assert!(err.contains("agent.auth.local-public-key-file"), "{err}");
    let good = dir.join("key.pem");
    std::fs::write(&good, key.public_pem()).unwrap();
    let settings = load(&[("AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE", good.to_str().unwrap())]).unwrap();
    assert!(settings.auth.enforced());
    assert_eq!(settings.server.address, IpAddr::from([0, 0, 0, 0]), "auth enforced → every interface by default");
    let err = load(&[
        ("AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE", good.to_str().unwrap()),
        ("AGENT_AUTH_LOCAL_PUBLIC_KEY", key.public_pem().as_str()),
    ])
    .unwrap_err();
    assert!(err.contains("only one of"), "{err}");
    std::fs::remove_dir_all(dir).ok();

    // A PEM with escaped newlines (one-line environment form) is accepted.
    let one_line = key.public_pem().replace('\n', "\\n");
    assert!(load(&[("AGENT_AUTH_LOCAL_PUBLIC_KEY", one_line.as_str())]).unwrap().auth.enforced());

    // Enabled explicitly with nothing to verify against.
    let err = load(&[("AGENT_AUTH_ENABLED", "true")]).unwrap_err();
    assert!(err.contains("agent.auth.enabled"), "{err}");
    // Without a key source a non-loopback address needs the explicit opt-out.
    let err = load(&[("SERVER_ADDRESS", "0.0.0.0")]).unwrap_err();
    assert!(err.contains("SERVER_ADDRESS") && err.contains("AGENT_AUTH_ENABLED=false"), "{err}");
}

#[test]
fn config_file_local_key() {
    let key = TestKey::generate("k");
    let dir = std::env::temp_dir().join(format!("agw-auth-toml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("agw.toml");
    std::fs::write(&file, format!("[agent.auth]\nlocal-public-key = \"\"\"\n{}\"\"\"\n", key.public_pem())).unwrap();
    let settings = Settings::load(Some(&file), Vec::<(String, String)>::new()).unwrap();
    assert!(settings.auth.enforced());
    assert!(settings.auth.describe().contains("2048 bits"), "{}", settings.auth.describe());
    std::fs::remove_dir_all(dir).ok();
}

/// Attack (issue 14): an oversized Authorization header, or a JWT whose header segment is huge,
/// is refused with 401 before any decoding; a normal token still works.
#[tokio::test]
async fn oversized_authorization_headers_are_refused_before_decoding() {
    let key = TestKey::generate("local");
    let gw = start(&local_key_env(&key.public_pem())).await;
    let huge = format!("Bearer {}", "A".repeat(20 * 1024));
    let (status, body) = agents(&gw, Some(&huge)).await;
    assert_eq!(status, 401);
    assert_eq!(body["msg"], "unauthorized: authorization header longer than 16384 bytes");
    let padded_header = json!({"alg": "RS256", "pad": "x".repeat(30 * 1024)});
    let (status, _) = with_token(&gw, &key.sign(&padded_header, &claims(json!({})))).await;
    assert_eq!(status, 401, "a JWT with a huge header segment");
    assert_eq!(with_token(&gw, &key.token(&claims(json!({})))).await.0, 200);
}

/// The other protocols' endpoints (issue 16) follow the same JWT rules as `/api/ap/**`.
#[tokio::test]
async fn the_other_protocols_need_a_token_too() {
    let key = TestKey::generate("local");
    let gw = start(&local_key_env(&key.public_pem())).await;
    let token = key.token(&claims(json!({})));
    for (method, path) in [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/api/ai-sdk/a/chat"),
        ("GET", "/api/ai-sdk/a/chat/x/stream"),
        ("POST", "/api/ag-ui/a"),
        ("GET", "/api/ap/attach?runId=x"),
        ("POST", "/api/ap/interrupt"),
        ("POST", "/api/ap/steer"),
    ] {
        let url = format!("{}{path}", gw.base);
        let request = if method == "GET" { gw.client.get(&url) } else { gw.client.post(&url).body("{}") };
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), 401, "{method} {path} without a token");
    }
    let models = gw.client.get(format!("{}/v1/models", gw.base)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(models.status(), 200);
    let body: Value = models.json().await.unwrap();
    assert_eq!(body["data"][0]["id"], "a");
}

/// Issue 32: with auth on, `/metrics` (agent keys, models, token and cost counters) answers only
/// a verified token; the probes (`/healthz`, `/readyz`) stay open. Without auth it is open.
#[tokio::test]
async fn metrics_need_a_verified_token_when_auth_is_on() {
    let key = TestKey::generate("local");
    let gw = start(&local_key_env(&key.public_pem())).await;
    let url = format!("{}/metrics", gw.base);
    for token in [None, Some("not-a-token".to_owned()), Some(TestKey::generate("other").token(&claims(json!({}))))] {
        let mut req = gw.client.get(&url);
        if let Some(token) = &token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 401, "token {token:?}");
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
        let body: Value = resp.json().await.unwrap();
        assert!(body["msg"].as_str().unwrap().starts_with("unauthorized: "), "{body}");
    }
    let resp = gw.client.get(&url).bearer_auth(key.token(&claims(json!({})))).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(gw.client.get(format!("{}{probe}", gw.base)).send().await.unwrap().status(), 200, "{probe}");
    }

    let open = start(&[]).await;
    assert_eq!(open.client.get(format!("{}/metrics", open.base)).send().await.unwrap().status(), 200);
}

/// The browser console's page needs no token (it asks for one); the API it calls does.
#[tokio::test]
async fn the_console_page_is_served_without_a_token_and_its_api_calls_need_one() {
    let key = TestKey::generate("local");
    let gw = start(&local_key_env(&key.public_pem())).await;
    let page = gw.client.get(format!("{}/console/", gw.base)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(agents(&gw, None).await.0, 401);
    assert_eq!(with_token(&gw, &key.token(&claims(json!({})))).await.0, 200);
}
