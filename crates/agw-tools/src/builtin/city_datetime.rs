//! `city_datetime` (docs/contract/tools-skills-viewports.md §4.6): the current date and time in a city, with the
//! lunar date.

use futures::future::BoxFuture;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use serde_json::{Value, json};

use super::{args, lunar, meta};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

pub(crate) const NAME: &str = "city_datetime";

/// City substrings (matched case-insensitively, in this order) and their time zones; anything
/// else is UTC. Note that any city containing "sf" is San Francisco, as in the reference.
const ZONES: [(&[&str], &str); 5] = [
    (
        &[
            "beijing",
            "shanghai",
            "guangzhou",
            "shenzhen",
            "hangzhou",
            "chengdu",
            "wuhan",
            "xian",
            "中国",
            "上海",
            "北京",
        ],
        "Asia/Shanghai",
    ),
    (&["tokyo", "东京"], "Asia/Tokyo"),
    (&["singapore", "新加坡"], "Asia/Singapore"),
    (&["new york", "nyc", "纽约"], "America/New_York"),
    (&["san francisco", "sf"], "America/Los_Angeles"),
];

const WEEKDAYS: [&str; 7] = ["星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"];

/// The `city_datetime` tool. The clock is injectable so tests can fix "now".
#[derive(Debug, Clone, Copy)]
pub struct CityDatetime {
    clock: fn() -> Timestamp,
}

impl Default for CityDatetime {
    fn default() -> Self {
        CityDatetime { clock: Timestamp::now }
    }
}

impl CityDatetime {
    /// A `city_datetime` on the system clock.
    pub fn new() -> CityDatetime {
        CityDatetime::default()
    }

    /// A `city_datetime` that reads the time from `clock` instead of the system clock.
    pub fn with_clock(clock: fn() -> Timestamp) -> CityDatetime {
        CityDatetime { clock }
    }

    /// The result object for `args` at the instant `now`.
    pub fn answer(args: &Value, now: Timestamp) -> Value {
        let city = args::text(args, "city").unwrap_or_else(|| "Shanghai".to_owned());
        let zone = zone_for(&city);
        let local = now.to_zoned(zone);
        let date = local.date();
        json!({
            "city": city,
            "timezone": offset_label(local.offset().seconds()),
            "date": format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day()),
            "weekday": WEEKDAYS[usize::from(local.weekday().to_monday_zero_offset().unsigned_abs())],
            "lunarDate": lunar::lunar_text(date),
            "time": format!("{:02}:{:02}:{:02}", local.hour(), local.minute(), local.second()),
            "iso": iso(&local),
            "source": "system-clock",
        })
    }
}

impl Tool for CityDatetime {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        meta::description(NAME)
    }

    fn parameters(&self) -> Value {
        meta::parameters(NAME)
    }

    fn after_call_hint(&self) -> &str {
        meta::after_call_hint(NAME)
    }

    /// It reads the clock.
    fn idempotent(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let output = ToolOutput::Json(Self::answer(&args, (self.clock)()));
        Box::pin(async move { Ok(output) })
    }
}

fn zone_for(city: &str) -> TimeZone {
    let lower = city.to_lowercase();
    ZONES
        .iter()
        .find(|(needles, _)| needles.iter().any(|needle| lower.contains(needle)))
        .and_then(|(_, name)| match TimeZone::get(name) {
            Ok(zone) => Some(zone),
            Err(e) => {
                tracing::warn!(zone = name, error = %e, "time zone missing from the bundled database; using UTC");
                None
            }
        })
        .unwrap_or(TimeZone::UTC)
}

/// `UTC+8`, `UTC-5`, `UTC+5:30`, `UTC+0`.
fn offset_label(seconds: i32) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let minutes = seconds.unsigned_abs() / 60;
    let (hours, minutes) = (minutes / 60, minutes % 60);
    if minutes == 0 { format!("UTC{sign}{hours}") } else { format!("UTC{sign}{hours}:{minutes:02}") }
}

/// ISO-8601 offset date-time with microseconds, e.g. `2026-02-13T10:15:30.123456+08:00`.
fn iso(local: &Zoned) -> String {
    let seconds = local.offset().seconds();
    let sign = if seconds < 0 { '-' } else { '+' };
    let minutes = seconds.unsigned_abs() / 60;
    let date = local.date();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}{sign}{:02}:{:02}",
        date.year(),
        date.month(),
        date.day(),
        local.hour(),
        local.minute(),
        local.second(),
        local.subsec_nanosecond() / 1000,
        minutes / 60,
        minutes % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn shanghai_on_a_spec_date() {
        let out = CityDatetime::answer(&json!({"city":"Shanghai"}), at("2026-02-13T02:15:30.123456Z"));
        assert_eq!(
            out.to_string(),
            r#"{"city":"Shanghai","timezone":"UTC+8","date":"2026-02-13","weekday":"星期五","lunarDate":"乙巳年腊月廿六","time":"10:15:30","iso":"2026-02-13T10:15:30.123456+08:00","source":"system-clock"}"#
        );
    }

    #[test]
    fn default_city_is_shanghai() {
        let out = CityDatetime::answer(&json!({}), at("2026-02-17T00:00:00Z"));
        assert_eq!(out["city"], "Shanghai");
        assert_eq!(out["lunarDate"], "丙午年正月初一");
        assert_eq!(out["weekday"], "星期二");
    }

    #[test]
    fn new_york_follows_daylight_saving_time() {
        let winter = CityDatetime::answer(&json!({"city":"New York"}), at("2026-01-15T12:00:00Z"));
        assert_eq!(winter["timezone"], "UTC-5");
        assert_eq!(winter["time"], "07:00:00");
        assert!(winter["iso"].as_str().unwrap().ends_with("-05:00"));
        let summer = CityDatetime::answer(&json!({"city":"nyc"}), at("2026-07-15T12:00:00Z"));
        assert_eq!(summer["timezone"], "UTC-4");
        assert_eq!(summer["time"], "08:00:00");
    }

    #[test]
    fn zones_by_substring() {
        let now = at("2026-01-15T12:00:00Z");
        let zone = |city: &str| CityDatetime::answer(&json!({ "city": city }), now)["timezone"].clone();
        assert_eq!(zone("东京都"), "UTC+9");
        assert_eq!(zone("Singapore"), "UTC+8");
        assert_eq!(zone("SF Bay"), "UTC-8");
        assert_eq!(zone("Paris"), "UTC+0");
        assert_eq!(zone("中国杭州"), "UTC+8");
    }

    #[test]
    fn offset_labels() {
        assert_eq!(offset_label(0), "UTC+0");
        assert_eq!(offset_label(8 * 3600), "UTC+8");
        assert_eq!(offset_label(-5 * 3600), "UTC-5");
        assert_eq!(offset_label(5 * 3600 + 1800), "UTC+5:30");
        assert_eq!(offset_label(-(9 * 3600 + 1800)), "UTC-9:30");
    }

    #[tokio::test]
    async fn injected_clock_is_used() {
        let tool = CityDatetime::with_clock(|| "2023-03-22T04:00:00Z".parse().unwrap());
        let out = tool.call(json!({"city":"上海"}), &ToolContext::default()).await.unwrap();
        let ToolOutput::Json(out) = out else { panic!("json expected") };
        assert_eq!(out["lunarDate"], "癸卯年闰二月初一");
        assert_eq!(out["city"], "上海");
    }
}
