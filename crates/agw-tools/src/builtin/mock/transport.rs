//! `mock_transport_schedule` (§4.14).

use serde_json::{Value, json};

use super::MOCK_TAG_ZH;
use crate::builtin::args;
use crate::builtin::java_random::JavaRandom;

pub(crate) const NAME: &str = "mock_transport_schedule";

const FLIGHTS: [&str; 5] = ["MU5137", "CA1502", "CZ3948", "HO1256", "ZH2871"];
const TRAINS: [&str; 5] = ["G102", "G356", "D2285", "G7311", "C2610"];
const FLIGHT_STATUSES: [&str; 4] = ["计划中", "值机中", "正点", "延误"];
const TRAIN_STATUSES: [&str; 4] = ["计划中", "检票中", "正点", "晚点"];

pub(crate) fn run(arguments: &Value) -> Value {
    let is_train = args::non_blank(arguments, "type").is_some_and(|t| t.eq_ignore_ascii_case("train") || t == "高铁");
    let from = args::non_blank(arguments, "fromCity").unwrap_or_else(|| "shanghai".to_owned());
    let to = args::non_blank(arguments, "toCity").unwrap_or_else(|| "beijing".to_owned());
    let date = args::non_blank(arguments, "date").unwrap_or_else(|| "2026-02-13".to_owned());

    let mut random = JavaRandom::for_args(arguments);
    let departure_hour = 6 + random.next_int(14);
    let departure_minute = if random.next_bool() { 0 } else { 30 };
    let duration = if is_train { 180 + random.next_int(240) } else { 90 + random.next_int(150) };
    let number = *random.pick(if is_train { &TRAINS } else { &FLIGHTS });
    let status = *random.pick(if is_train { &TRAIN_STATUSES } else { &FLIGHT_STATUSES });
    let gate_or_platform = if is_train {
        format!("{} 站台", 1 + random.next_int(16))
    } else {
        let terminal = 1 + random.next_int(2);
        format!("T{terminal}-{}", 10 + random.next_int(20))
    };
    let departure = departure_hour * 60 + departure_minute;
    let arrival = (departure + duration) % (24 * 60);
    json!({
        "travelType": if is_train { "高铁" } else { "航班" },
        "number": number,
        "fromCity": args::translate_city(Some(&from)),
        "toCity": args::translate_city(Some(&to)),
        "date": date,
        "departureTime": hh_mm(departure),
        "arrivalTime": hh_mm(arrival),
        "status": status,
        "gateOrPlatform": gate_or_platform,
        "mockTag": MOCK_TAG_ZH,
    })
}

fn hh_mm(minutes: i32) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_vector() {
        let out = run(&json!({"type":"flight","fromCity":"Shanghai","toCity":"Beijing","date":"2026-02-14"}));
        assert_eq!(
            out.to_string(),
            r#"{"travelType":"航班","number":"ZH2871","fromCity":"上海","toCity":"北京","date":"2026-02-14","departureTime":"18:00","arrivalTime":"20:13","status":"计划中","gateOrPlatform":"T2-16","mockTag":"幂等随机数据"}"#
        );
    }

    #[test]
    fn reference_suite_train() {
        let args = json!({"type":"train","fromCity":"Shanghai","toCity":"Nanjing","date":"2026-02-15"});
        let out = run(&args);
        assert_eq!(out["travelType"], "高铁");
        assert_eq!(out["fromCity"], "上海");
        assert_eq!(out["toCity"], "南京");
        assert!(TRAINS.contains(&out["number"].as_str().unwrap()));
        for key in ["departureTime", "arrivalTime"] {
            let time = out[key].as_str().unwrap();
            assert!(time.len() == 5 && time.as_bytes()[2] == b':', "{time}");
        }
        assert!(out["gateOrPlatform"].as_str().unwrap().ends_with(" 站台"));
        assert_eq!(run(&args), out);
    }

    #[test]
    fn defaults() {
        let out = run(&json!({"type":"高铁"}));
        assert_eq!(out["travelType"], "高铁");
        assert_eq!(
            (&out["fromCity"], &out["toCity"], &out["date"]),
            (&json!("上海"), &json!("北京"), &json!("2026-02-13"))
        );
        assert_eq!(run(&json!({}))["travelType"], "航班");
    }
}
