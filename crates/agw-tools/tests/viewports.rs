//! The viewport registry (docs/contract/tools-skills-viewports.md §10; agw serves all five types).

use agw_testkit::TempDir;
use agw_tools::bundled::VIEWPORT_FILES;
use agw_tools::{ViewportKind, ViewportPayload, ViewportRegistry};
use serde_json::json;

#[test]
fn reference_html_and_qlc() {
    let dir = TempDir::new("vp");
    dir.write("weather_card.html", "<div>ok</div>");
    dir.write("flight_form.qlc", r#"{"fields":[{"name":"from"}]}"#);
    dir.write("bad.qlc", "{ nope");
    let registry = ViewportRegistry::load(dir.path());
    let card = registry.get("weather_card").unwrap();
    assert_eq!(card.viewport_type_str(), "html");
    assert_eq!(card.payload, ViewportPayload::Text("<div>ok</div>".into()));
    let form = registry.get("flight_form").unwrap();
    assert_eq!(form.kind, ViewportKind::Qlc);
    assert_eq!(form.payload, ViewportPayload::Json(json!({"fields":[{"name":"from"}]})));
    assert!(registry.get("bad").is_none());
    assert_eq!(registry.problems().len(), 1);
    assert!(registry.problems()[0].file.ends_with("bad.qlc"));
    assert!(registry.problems()[0].message.contains("invalid JSON"));
}

#[test]
fn every_designed_type_is_served() {
    let registry = ViewportRegistry::from_sources([
        ("a.dqlc", "[1,2]"),
        ("b.JSON_SCHEMA", r#"{"type":"object"}"#),
        ("c.custom", "custom text, not JSON"),
        ("d.Html", "<p>d</p>"),
        ("e.qlc", "\"a string is JSON too\""),
    ]);
    let kinds: Vec<&str> =
        ["a", "b", "c", "d", "e"].iter().map(|k| registry.get(k).unwrap().viewport_type_str()).collect();
    assert_eq!(kinds, ["dqlc", "json_schema", "custom", "html", "qlc"]);
    assert_eq!(registry.get("a").unwrap().payload, ViewportPayload::Json(json!([1, 2])));
    assert_eq!(registry.get("c").unwrap().payload, ViewportPayload::Text("custom text, not JSON".into()));
    assert!(registry.problems().is_empty());
}

#[test]
fn invalid_json_is_skipped_for_every_json_type() {
    let registry = ViewportRegistry::from_sources([("a.dqlc", "{"), ("b.json_schema", ""), ("c.qlc", "[1,")]);
    assert!(registry.is_empty());
    assert_eq!(registry.problems().len(), 3);
}

#[test]
fn first_file_in_name_order_wins() {
    let registry = ViewportRegistry::from_sources([("x.qlc", "{}"), ("x.html", "<b>html</b>"), ("X.custom", "c")]);
    // Name order: "X.custom" < "x.html" < "x.qlc" (upper case sorts first).
    assert_eq!(registry.get("x").unwrap().kind, ViewportKind::Custom);
    assert_eq!(registry.len(), 1);
    assert_eq!(registry.problems().len(), 2);
    let registry = ViewportRegistry::from_sources([("x.qlc", "{}"), ("x.html", "<b>html</b>")]);
    assert_eq!(registry.get("x").unwrap().kind, ViewportKind::Html, "x.html beats x.qlc");
}

#[test]
fn lookup_trims_and_ignores_case() {
    let registry = ViewportRegistry::from_sources([("Weather_Card.html", "w")]);
    assert!(registry.get("  WEATHER_card ").is_some());
    assert!(registry.get("weather").is_none());
    assert_eq!(registry.keys(), ["weather_card"]);
}

#[test]
fn other_files_are_ignored() {
    let dir = TempDir::new("vp-other");
    dir.write("readme.md", "# hi");
    dir.write("data.json", "{}");
    dir.write(".hidden.html", "<p>hidden</p>");
    dir.write("nested/inner.html", "<p>inner</p>");
    dir.mkdir("dir.html");
    let registry = ViewportRegistry::load(dir.path());
    assert!(registry.is_empty(), "{:?}", registry.keys());
}

#[test]
fn missing_directory_is_empty() {
    let registry = ViewportRegistry::load(std::path::Path::new("/no/such/agw/viewports"));
    assert!(registry.is_empty());
    assert!(registry.problems().is_empty());
}

#[cfg(unix)]
#[test]
fn symlinks_out_of_the_directory_are_not_followed() {
    let outside = TempDir::new("vp-outside");
    let secret = outside.write("secret.txt", "SECRET");
    let dir = TempDir::new("vp-links");
    dir.symlink(&secret, "leak.html");
    dir.symlink("/etc/passwd", "passwd.custom");
    let real = dir.write("real.txt", "<p>real</p>");
    dir.symlink(&real, "alias.html");
    let registry = ViewportRegistry::load(dir.path());
    assert!(registry.get("leak").is_none());
    assert!(registry.get("passwd").is_none());
    assert_eq!(registry.get("alias").unwrap().payload, ViewportPayload::Text("<p>real</p>".into()));
}

#[test]
fn bundled_viewports() {
    let registry = ViewportRegistry::from_sources(VIEWPORT_FILES.iter().copied());
    assert!(registry.problems().is_empty());
    assert_eq!(
        registry.keys(),
        ["confirm_dialog", "show_logistics_status", "show_todo_card", "show_transport_card", "show_weather_card"]
    );
    for key in registry.keys() {
        let viewport = registry.get(key).unwrap();
        let ViewportPayload::Text(html) = &viewport.payload else { panic!("{key} is not html") };
        assert!(html.starts_with("<!doctype html>"), "{key}");
        assert!(html.contains("addEventListener(\"message\""), "{key} listens for window messages");
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"), "{key} must be self-contained");
        assert!(!html.contains("innerHTML"), "{key} must render data as text");
    }
    let dialog = registry.get("confirm_dialog").unwrap();
    let ViewportPayload::Text(html) = &dialog.payload else { unreachable!() };
    for needle in
        ["tool_init", "frontend_submit", "selectedOption", "selectedIndex", "freeText", "isCustom", "allowFreeText"]
    {
        assert!(html.contains(needle), "confirm_dialog.html lacks {needle}");
    }
    let ViewportPayload::Text(weather) = &registry.get("show_weather_card").unwrap().payload else { unreachable!() };
    assert!(weather.contains("<title>天气卡片</title>"));
}
