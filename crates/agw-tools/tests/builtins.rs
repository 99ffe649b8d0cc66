//! The built-in tools through the `Tool` interface, as the modes call them (§4).

use std::sync::Arc;
use std::time::Duration;

use agw_tools::{BuiltinsConfig, Tool, ToolContext, ToolOutput, builtins, execute_backend};
use serde_json::{Value, json};

fn tool(name: &str) -> Arc<dyn Tool> {
    builtins(BuiltinsConfig::default()).into_iter().find(|t| t.name() == name).unwrap()
}

async fn call_json(tool: &dyn Tool, args: Value) -> Value {
    match tool.call(args, &ToolContext::default()).await.unwrap() {
        ToolOutput::Json(value) => value,
        other => panic!("json expected, got {other:?}"),
    }
}

#[tokio::test]
async fn reference_mock_tools_are_idempotent() {
    for (name, args) in [
        ("mock_city_weather", json!({"city":"Shanghai","date":"2026-02-13"})),
        ("mock_logistics_status", json!({"trackingNo":"YT1234567890"})),
        (
            "mock_transport_schedule",
            json!({"type":"train","fromCity":"Shanghai","toCity":"Nanjing","date":"2026-02-15"}),
        ),
        ("mock_todo_tasks", json!({"owner":"张三"})),
        ("mock_ops_runbook", json!({"message":"检查磁盘"})),
    ] {
        let tool = tool(name);
        let first = execute_backend(tool.as_ref(), args.clone(), &ToolContext::default(), Duration::from_secs(1), 0)
            .await
            .into_text();
        let second =
            execute_backend(tool.as_ref(), args, &ToolContext::default(), Duration::from_secs(1), 0).await.into_text();
        assert_eq!(first, second, "{name}");
        assert!(first.starts_with('{') && !first.contains("\"ok\":false"), "{name}: {first}");
    }
}

#[tokio::test]
async fn spec_weather_vector_through_execution() {
    let tool = tool("mock_city_weather");
    let text = execute_backend(
        tool.as_ref(),
        json!({"city":"Shanghai","date":"2026-02-13"}),
        &ToolContext::default(),
        Duration::from_secs(1),
        0,
    )
    .await
    .into_text();
    assert_eq!(
        text,
        r#"{"city":"上海","date":"2026-02-13","temperatureC":23,"humidity":66,"windLevel":2,"condition":"雾","mockTag":"幂等随机数据"}"#
    );
}

#[tokio::test]
async fn reference_city_datetime_shape() {
    let out = call_json(tool("city_datetime").as_ref(), json!({"city":"Shanghai"})).await;
    assert_eq!(out["timezone"], "UTC+8");
    assert_eq!(out["source"], "system-clock");
    assert!(!out["date"].as_str().unwrap().is_empty());
    assert!(out["weekday"].as_str().unwrap().starts_with("星期"));
    assert!(out["lunarDate"].as_str().unwrap().contains('年'));
    assert_eq!(out["time"].as_str().unwrap().len(), 8);
    let iso = out["iso"].as_str().unwrap();
    assert!(iso.parse::<jiff::Timestamp>().is_ok(), "iso parses as an offset date-time: {iso}");
    assert!(iso.ends_with("+08:00"));
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["city", "timezone", "date", "weekday", "lunarDate", "time", "iso", "source"]);
}

#[tokio::test]
async fn every_builtin_survives_hostile_arguments() {
    let config = BuiltinsConfig::default();
    let hostile = [
        json!({}),
        json!({"city":null,"date":[],"trackingNo":{},"owner":5,"type":true,"text":1.5,"command":["ls"]}),
        json!({"city":"\u{0}","date":"9999-99-99","fromCity":"","toCity":"   ","key":"","config":"x","mode":7}),
        json!({"message":"😀".repeat(1000),"budget":{"model":"x"},"toolConfig":[],"modelConfig":{"reasoning":"yes"}}),
    ];
    for tool in builtins(config) {
        for args in &hostile {
            let text = execute_backend(tool.as_ref(), args.clone(), &ToolContext::default(), Duration::from_secs(5), 0)
                .await
                .into_text();
            assert!(!text.is_empty(), "{}", tool.name());
        }
    }
}
