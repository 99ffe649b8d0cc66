//! `mock_ops_runbook` (§4.11).

use serde_json::{Value, json};

use super::MOCK_TAG_EN;
use crate::builtin::args;
use crate::builtin::java_random::JavaRandom;

pub(crate) const NAME: &str = "mock_ops_runbook";

const RISK_LEVELS: [&str; 3] = ["low", "medium", "high"];
const STEPS: [&str; 3] = ["检查系统负载与磁盘利用率", "确认业务实例状态", "输出巡检摘要"];

pub(crate) fn run(arguments: &Value) -> Value {
    let mut random = JavaRandom::for_args(arguments);
    let risk_level = *random.pick(&RISK_LEVELS);
    let command = if random.next_bool() { "df -h" } else { "ls -la" };
    let message = args::text(arguments, "message").or_else(|| args::text(arguments, "query")).unwrap_or_default();
    json!({
        "message": message,
        "city": args::non_blank(arguments, "city").unwrap_or_else(|| "Shanghai".to_owned()),
        "riskLevel": risk_level,
        "recommendedCommand": command,
        "steps": STEPS,
        "mockTag": MOCK_TAG_EN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_vector() {
        let out = run(&json!({"message":"检查磁盘"}));
        assert_eq!(
            out.to_string(),
            r#"{"message":"检查磁盘","city":"Shanghai","riskLevel":"low","recommendedCommand":"ls -la","steps":["检查系统负载与磁盘利用率","确认业务实例状态","输出巡检摘要"],"mockTag":"idempotent-random-json"}"#
        );
    }

    #[test]
    fn query_is_the_fallback_message() {
        let out = run(&json!({"query":"q","city":"Beijing"}));
        assert_eq!(out["message"], "q");
        assert_eq!(out["city"], "Beijing");
        assert_eq!(run(&json!({}))["message"], "");
    }
}
