//! `mock_logistics_status` (§4.10).

use serde_json::{Value, json};

use super::MOCK_TAG_EN;
use crate::builtin::args;
use crate::builtin::java_random::JavaRandom;
use crate::dates;

pub(crate) const NAME: &str = "mock_logistics_status";

const CARRIERS: [&str; 5] = ["SF Express", "YTO Express", "ZTO Express", "JD Logistics", "EMS"];
const STATUSES: [&str; 4] = ["ORDER_CONFIRMED", "IN_TRANSIT", "OUT_FOR_DELIVERY", "DELIVERED"];
const NODES: [&str; 5] = [
    "Parcel information received",
    "Departed sorting center",
    "Arrived destination city",
    "Courier is delivering",
    "Delivered and signed",
];

pub(crate) fn run(arguments: &Value) -> Value {
    let mut random = JavaRandom::for_args(arguments);
    // Draws happen only when needed, in this order.
    let tracking_no = args::non_blank(arguments, "trackingNo")
        .unwrap_or_else(|| format!("MOCK{}", 100_000 + random.next_int(900_000)));
    let carrier = args::non_blank(arguments, "carrier").unwrap_or_else(|| (*random.pick(&CARRIERS)).to_owned());
    let status_index = random.next_int(4) as usize;
    let current_node = NODES[(status_index + 1).min(4)];
    let eta_days = 1 + random.next_int(5);
    let hours = random.next_int(120);
    let minutes = random.next_int(60);
    json!({
        "trackingNo": tracking_no,
        "carrier": carrier,
        "status": STATUSES[status_index],
        "currentNode": current_node,
        "etaDate": base_date_plus(i64::from(eta_days)),
        "updatedAt": updated_at(i64::from(hours), i64::from(minutes)),
        "mockTag": MOCK_TAG_EN,
    })
}

/// 2026-01-01 plus some days, as `yyyy-MM-dd`.
fn base_date_plus(days: i64) -> String {
    let base = jiff::civil::date(2026, 1, 1);
    dates::add_days(base, days).map(dates::format_ymd).unwrap_or_default()
}

/// 2026-01-01 08:00:00 plus hours and minutes, as `yyyy-MM-dd HH:mm:ss`.
fn updated_at(hours: i64, minutes: i64) -> String {
    let total = 8 * 60 + hours * 60 + minutes;
    format!("{} {:02}:{:02}:00", base_date_plus(total / 1440), total % 1440 / 60, total % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_vector() {
        let out = run(&json!({"trackingNo":"SF123456789CN"}));
        assert_eq!(
            out.to_string(),
            r#"{"trackingNo":"SF123456789CN","carrier":"EMS","status":"DELIVERED","currentNode":"Delivered and signed","etaDate":"2026-01-04","updatedAt":"2026-01-03 14:13:00","mockTag":"idempotent-random-json"}"#
        );
    }

    #[test]
    fn reference_suite_shape() {
        let args = json!({"trackingNo":"YT1234567890"});
        let out = run(&args);
        assert_eq!(out["trackingNo"], "YT1234567890");
        for key in ["carrier", "status", "currentNode", "etaDate", "updatedAt"] {
            assert!(!out[key].as_str().unwrap().is_empty(), "{key}");
        }
        assert_eq!(run(&args), out);
    }

    #[test]
    fn blank_tracking_number_is_generated() {
        let out = run(&json!({"trackingNo":"  ","carrier":"X"}));
        let tracking = out["trackingNo"].as_str().unwrap();
        assert!(tracking.starts_with("MOCK") && tracking.len() == 10, "{tracking}");
        assert_eq!(out["carrier"], "X");
    }
}
