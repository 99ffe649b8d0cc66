//! `mock_city_weather` (§4.9).

use serde_json::{Value, json};

use super::MOCK_TAG_ZH;
use crate::builtin::args;
use crate::builtin::java_random::JavaRandom;

pub(crate) const NAME: &str = "mock_city_weather";

const CONDITIONS: [&str; 7] = ["晴", "多云", "晴间多云", "小雨", "雷阵雨", "雾", "小雪"];

pub(crate) fn run(arguments: &Value) -> Value {
    let mut random = JavaRandom::for_args(arguments);
    let temperature = 5 + random.next_int(28);
    let humidity = 35 + random.next_int(55);
    let wind_level = 1 + random.next_int(7);
    let condition = *random.pick(&CONDITIONS);
    json!({
        "city": args::translate_city(args::text(arguments, "city").as_deref()),
        "date": args::non_blank(arguments, "date").unwrap_or_else(|| "1970-01-01".to_owned()),
        "temperatureC": temperature,
        "humidity": humidity,
        "windLevel": wind_level,
        "condition": condition,
        "mockTag": MOCK_TAG_ZH,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_vectors() {
        let out = run(&json!({"city":"Shanghai","date":"2026-02-09"}));
        assert_eq!(
            out.to_string(),
            r#"{"city":"上海","date":"2026-02-09","temperatureC":27,"humidity":88,"windLevel":4,"condition":"小雪","mockTag":"幂等随机数据"}"#
        );
        let out = run(&json!({"city":"Shanghai","date":"2026-02-13"}));
        assert_eq!(
            out.to_string(),
            r#"{"city":"上海","date":"2026-02-13","temperatureC":23,"humidity":66,"windLevel":2,"condition":"雾","mockTag":"幂等随机数据"}"#
        );
    }

    #[test]
    fn defaults_and_determinism() {
        let out = run(&json!({}));
        assert_eq!(out["city"], "上海");
        assert_eq!(out["date"], "1970-01-01");
        let args = json!({"city":"Tokyo","date":"2026-03-01"});
        assert_eq!(run(&args), run(&args));
        assert_eq!(run(&args)["city"], "东京");
    }
}
