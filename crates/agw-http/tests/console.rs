//! The browser console's files over real HTTP (issue 40, docs/console.md): served at
//! `/console/` with a policy that allows nothing but agw's own origin, behind the same Host check
//! as everything else, without a token (the page asks for one for the API), and off with the
//! setting. What the page does in a browser is scripts/console (headless Chromium).

mod common;

use common::{Gateway, oneshot_agent};

#[tokio::test]
async fn the_console_is_served_with_its_policy_and_the_root_leads_to_it() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for from in ["/", "/console"] {
        let resp = client.get(format!("{}{from}", gw.base)).send().await.unwrap();
        assert_eq!(resp.status(), 302, "{from}");
        assert_eq!(resp.headers()["location"], "/console/");
    }
    let page = gw.client.get(format!("{}/console/", gw.base)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'none'; script-src 'self'; style-src 'self';"), "{policy}");
    assert!(policy.contains("connect-src 'self'") && policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let html = page.text().await.unwrap();
    assert!(html.contains("<title>agw console</title>"));
    for (path, kind) in [("console.js", "text/javascript"), ("console.css", "text/css")] {
        let resp = gw.client.get(format!("{}/console/{path}", gw.base)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        assert!(resp.headers()["content-type"].to_str().unwrap().starts_with(kind), "{path}");
    }
    let missing = gw.client.get(format!("{}/console/nope.js", gw.base)).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    // The page's API calls go to the API: the console has no endpoint of its own.
    let post = gw.client.post(format!("{}/console/", gw.base)).json(&serde_json::json!({})).send().await.unwrap();
    assert_eq!(post.status(), 404);
}

#[tokio::test]
async fn the_setting_turns_it_off() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("AGW_CONSOLE_ENABLED", "false")]).await;
    for path in ["/", "/console/", "/console/console.js"] {
        let resp = gw.client.get(format!("{}{path}", gw.base)).send().await.unwrap();
        assert_eq!(resp.status(), 404, "{path}");
    }
}

#[tokio::test]
async fn the_host_check_covers_it() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    let resp = gw.client.get(format!("{}/console/", gw.base)).header("host", "evil.example").send().await.unwrap();
    assert_eq!(resp.status(), 403);
}
