//! CORS over real HTTP (docs/contract/config.md §8, docs/contract/http-api.md §10).

mod common;

use agw_testkit::Transcript;
use common::{Gateway, oneshot_agent, read_stream};
use reqwest::Method;
use serde_json::json;

async fn gateway(env: &[(&str, &str)]) -> Gateway {
    Gateway::start(&[oneshot_agent("a", false, 5000)], env).await
}

async fn preflight(gw: &Gateway, path: &str, origin: &str, method: &str, headers: Option<&str>) -> reqwest::Response {
    let mut req = gw
        .client
        .request(Method::OPTIONS, format!("{}{path}", gw.base))
        .header("origin", origin)
        .header("access-control-request-method", method);
    if let Some(h) = headers {
        req = req.header("access-control-request-headers", h);
    }
    req.send().await.unwrap()
}

fn header<'a>(resp: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).map(|v| v.to_str().unwrap())
}

fn vary(resp: &reqwest::Response) -> Vec<String> {
    resp.headers()
        .get_all("vary")
        .iter()
        .flat_map(|v| v.to_str().unwrap().split(',').map(|s| s.trim().to_string()).collect::<Vec<_>>())
        .collect()
}

async fn assert_forbidden(resp: reqwest::Response) {
    assert_eq!(resp.status(), 403);
    assert!(header(&resp, "access-control-allow-origin").is_none());
    assert!(vary(&resp).contains(&"Origin".to_string()));
    assert_eq!(resp.text().await.unwrap(), "Invalid CORS request");
}

#[tokio::test]
async fn preflight_from_an_allowed_origin() {
    let gw = gateway(&[]).await;
    let resp = preflight(&gw, "/api/ap/query", "http://localhost:5173", "POST", Some("content-type, x-trace-id")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some("http://localhost:5173"));
    assert_eq!(header(&resp, "access-control-allow-methods"), Some("GET, POST, PUT, PATCH, DELETE, OPTIONS"));
    assert_eq!(header(&resp, "access-control-allow-headers"), Some("content-type, x-trace-id"), "`*` echoes");
    assert_eq!(header(&resp, "access-control-max-age"), Some("3600"));
    assert!(header(&resp, "access-control-allow-credentials").is_none(), "credentials off by default");
    let vary = vary(&resp);
    for v in ["Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"] {
        assert!(vary.contains(&v.to_string()), "Vary lacks {v}: {vary:?}");
    }
    assert!(resp.text().await.unwrap().is_empty());

    // Without requested headers there is nothing to echo.
    let resp = preflight(&gw, "/api/ap/agents", "http://localhost:3000", "GET", None).await;
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "access-control-allow-headers").is_none());
}

#[tokio::test]
async fn preflight_from_a_disallowed_origin_or_for_a_disallowed_method_is_403() {
    let gw = gateway(&[("AGENT_CORS_ALLOWED_METHODS", "GET,POST")]).await;
    assert_forbidden(preflight(&gw, "/api/ap/query", "http://evil.example", "POST", None).await).await;
    assert_forbidden(preflight(&gw, "/api/ap/query", "http://localhost:5173", "DELETE", None).await).await;
    let ok = preflight(&gw, "/api/ap/query", "http://localhost:5173", "POST", None).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(header(&ok, "access-control-allow-methods"), Some("GET, POST"));
}

#[tokio::test]
async fn every_loopback_origin_is_allowed_by_default_with_any_port_or_none() {
    let gw = gateway(&[]).await;
    for origin in [
        "http://localhost:3000",
        "http://localhost:5173",
        "HTTP://LOCALHOST:9000",
        "http://localhost",
        "http://127.0.0.1:5173",
        "http://127.0.0.1",
        "http://[::1]:8080",
        "http://[::1]",
    ] {
        let resp = preflight(&gw, "/api/ap/query", origin, "POST", None).await;
        assert_eq!(resp.status(), 200, "{origin}");
        assert_eq!(header(&resp, "access-control-allow-origin"), Some(origin));
    }
    for origin in ["https://localhost:5173", "http://localhost.evil.example", "http://127.0.0.1.evil.example"] {
        assert_forbidden(preflight(&gw, "/api/ap/query", origin, "POST", None).await).await;
    }
}

#[tokio::test]
async fn a_star_port_matches_digits_only() {
    let default = gateway(&[]).await;
    let explicit = gateway(&[("AGENT_CORS_ALLOWED_ORIGIN_PATTERNS", "http://localhost:*")]).await;
    for gw in [&default, &explicit] {
        for origin in ["http://localhost:3000.evil.com", "http://localhost:3000@evil.com", "http://localhost:3000/x"] {
            assert_forbidden(preflight(gw, "/api/ap/query", origin, "POST", None).await).await;
            let url = format!("{}/api/ap/agents", gw.base);
            assert_forbidden(gw.client.get(&url).header("origin", origin).send().await.unwrap()).await;
        }
        assert_eq!(preflight(gw, "/api/ap/query", "http://localhost:3000", "POST", None).await.status(), 200);
    }
    // `:*` needs a port; `:[*]` (the default) makes it optional.
    assert_forbidden(preflight(&explicit, "/api/ap/query", "http://localhost", "POST", None).await).await;
}

/// The web client is served on `http://127.0.0.1:<port>`: with default settings its preflight
/// and its query both pass.
#[tokio::test]
async fn a_web_client_on_127_0_0_1_works_with_default_settings() {
    let gw = gateway(&[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["hello", " there"]));
    let origin = "http://127.0.0.1:5173";
    let resp = preflight(&gw, "/api/ap/query", origin, "POST", Some("content-type")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some(origin));
    assert_eq!(header(&resp, "access-control-allow-headers"), Some("content-type"));

    let resp = gw
        .client
        .post(format!("{}/api/ap/query", gw.base))
        .header("origin", origin)
        .json(&json!({"agentKey": "a", "message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some(origin));
    let stream = read_stream(resp).await;
    assert_eq!(stream.of_type("content.delta").len(), 2);
    assert_eq!(stream.last()["type"], "run.complete");
}

#[tokio::test]
async fn actual_requests_get_allow_origin_expose_headers_and_vary() {
    let gw = gateway(&[]).await;
    let url = format!("{}/api/ap/agents", gw.base);

    let resp = gw.client.get(&url).header("origin", "http://localhost:5173").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some("http://localhost:5173"));
    assert_eq!(header(&resp, "access-control-expose-headers"), Some("Content-Type"));
    assert_eq!(vary(&resp), ["Origin"]);
    assert_eq!(header(&resp, "content-type"), Some("application/json"));
    assert_eq!(resp.json::<serde_json::Value>().await.unwrap()["code"], 0);

    // A disallowed origin is refused before the handler runs.
    assert_forbidden(gw.client.get(&url).header("origin", "http://evil.example").send().await.unwrap()).await;

    // No Origin: untouched.
    let resp = gw.client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "access-control-allow-origin").is_none());
    assert!(header(&resp, "vary").is_none());

    // Same origin (Origin names this server): untouched, even though it is not in the patterns.
    let resp = gw.client.get(&url).header("origin", gw.base.as_str()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "access-control-allow-origin").is_none());

    // Outside the path pattern: untouched.
    let resp =
        gw.client.get(format!("{}/healthz", gw.base)).header("origin", "http://evil.example").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "access-control-allow-origin").is_none());

    // Errors from the handler carry the headers too.
    let resp = gw.client.get(format!("{url}x")).header("origin", "http://localhost:5173").send().await.unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some("http://localhost:5173"));
}

#[tokio::test]
async fn streamed_query_keeps_streaming_with_cors_headers() {
    let gw = gateway(&[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["one", " two", " three"]));
    let resp = gw
        .client
        .post(format!("{}/api/ap/query", gw.base))
        .header("origin", "http://localhost:5173")
        .json(&json!({"agentKey": "a", "message": "count"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), Some("text/event-stream"));
    assert_eq!(header(&resp, "access-control-allow-origin"), Some("http://localhost:5173"));
    assert_eq!(vary(&resp), ["Origin"]);
    let stream = read_stream(resp).await;
    assert_eq!(stream.of_type("content.delta").len(), 3);
    assert_eq!(stream.last()["type"], "run.complete");
}

#[tokio::test]
async fn configured_patterns_credentials_exposed_headers_and_max_age() {
    let gw = gateway(&[
        ("AGENT_CORS_ALLOWED_ORIGIN_PATTERNS", "https://*.example.com, http://localhost:[3000,5173]"),
        ("AGENT_CORS_ALLOWED_HEADERS", "Content-Type,Authorization"),
        ("AGENT_CORS_EXPOSED_HEADERS", "Content-Type, X-Request-Id"),
        ("AGENT_CORS_ALLOW_CREDENTIALS", "true"),
        ("AGENT_CORS_MAX_AGE_SECONDS", "60"),
    ])
    .await;
    let resp = preflight(&gw, "/api/ap/query", "https://app.example.com", "POST", Some("authorization")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some("https://app.example.com"));
    assert_eq!(header(&resp, "access-control-allow-credentials"), Some("true"));
    assert_eq!(header(&resp, "access-control-max-age"), Some("60"));
    assert_eq!(header(&resp, "access-control-allow-headers"), Some("authorization"));
    // A header outside the list is refused.
    assert_forbidden(preflight(&gw, "/api/ap/query", "https://app.example.com", "POST", Some("x-other")).await).await;
    // Listed ports only.
    assert_eq!(preflight(&gw, "/api/ap/query", "http://localhost:5173", "POST", None).await.status(), 200);
    assert_forbidden(preflight(&gw, "/api/ap/query", "http://localhost:8080", "POST", None).await).await;
    assert_forbidden(preflight(&gw, "/api/ap/query", "https://example.org", "POST", None).await).await;

    let resp = gw
        .client
        .get(format!("{}/api/ap/agents", gw.base))
        .header("origin", "https://app.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "access-control-expose-headers"), Some("Content-Type, X-Request-Id"));
    assert_eq!(header(&resp, "access-control-allow-credentials"), Some("true"));
}

/// Issue 32: the default patterns cover every route a browser client calls — agw's API, the AI
/// SDK and AG-UI endpoints, the OpenAI façade and MCP — so a page on an allowed origin can use
/// them; a foreign page's reads there are refused like under `/api/**`.
#[tokio::test]
async fn the_default_patterns_cover_the_openai_facade_and_mcp() {
    let gw = gateway(&[]).await;
    for path in ["/v1/chat/completions", "/v1/models", "/mcp", "/api/ai-sdk/a/chat", "/api/ag-ui/a"] {
        let resp = preflight(&gw, path, "http://localhost:5173", "POST", Some("content-type")).await;
        assert_eq!(resp.status(), 200, "{path}");
        assert_eq!(header(&resp, "access-control-allow-origin"), Some("http://localhost:5173"), "{path}");
        assert_forbidden(preflight(&gw, path, "http://evil.example", "POST", None).await).await;
    }
    let url = format!("{}/v1/models", gw.base);
    let resp = gw.client.get(&url).header("origin", "http://localhost:5173").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "access-control-allow-origin"), Some("http://localhost:5173"));
    assert_forbidden(gw.client.get(&url).header("origin", "http://evil.example").send().await.unwrap()).await;

    // A configured list replaces the default.
    let gw = gateway(&[("AGENT_CORS_PATH_PATTERN", "/api/ap/**, /v1/**")]).await;
    let resp = preflight(&gw, "/v1/chat/completions", "http://localhost:5173", "POST", None).await;
    assert_eq!(header(&resp, "access-control-allow-origin"), Some("http://localhost:5173"));
    let resp = preflight(&gw, "/api/ai-sdk/a/chat", "http://localhost:5173", "POST", None).await;
    assert!(header(&resp, "access-control-allow-origin").is_none(), "outside the configured patterns");
}
