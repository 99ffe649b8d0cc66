//! Reading tool arguments leniently: models send numbers as strings and strings as numbers. Public
//! so that tools implemented in other crates read arguments the way the built-ins do.

use serde_json::Value;

use super::java_random::java_to_string;

/// The argument as text: strings as-is, other values as Java would print them; absent or JSON
/// null → `None`.
pub fn text(args: &Value, key: &str) -> Option<String> {
    match args.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(java_to_string(other)),
    }
}

/// The argument as trimmed, non-blank text.
pub fn non_blank(args: &Value, key: &str) -> Option<String> {
    text(args, key).map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// The first of `keys` that gives non-blank text.
pub fn first_non_blank(args: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|key| non_blank(args, key))
}

/// City names the weather and transport mocks translate to Chinese (§4.8).
const CITY_NAMES: [(&str, &str); 29] = [
    ("shanghai", "上海"),
    ("beijing", "北京"),
    ("guangzhou", "广州"),
    ("shenzhen", "深圳"),
    ("hangzhou", "杭州"),
    ("chengdu", "成都"),
    ("wuhan", "武汉"),
    ("nanjing", "南京"),
    ("xian", "西安"),
    ("xi'an", "西安"),
    ("chongqing", "重庆"),
    ("tianjin", "天津"),
    ("suzhou", "苏州"),
    ("hong kong", "香港"),
    ("taipei", "台北"),
    ("singapore", "新加坡"),
    ("tokyo", "东京"),
    ("osaka", "大阪"),
    ("seoul", "首尔"),
    ("new york", "纽约"),
    ("los angeles", "洛杉矶"),
    ("san francisco", "旧金山"),
    ("london", "伦敦"),
    ("paris", "巴黎"),
    ("berlin", "柏林"),
    ("sydney", "悉尼"),
    ("melbourne", "墨尔本"),
    ("dubai", "迪拜"),
    ("", "上海"),
];

/// Trimmed, lower-cased lookup; unknown names come back trimmed; blank or absent → `上海`.
pub(crate) fn translate_city(city: Option<&str>) -> String {
    let trimmed = city.unwrap_or_default().trim();
    let lower = trimmed.to_lowercase();
    CITY_NAMES.iter().find(|(en, _)| *en == lower).map_or_else(|| trimmed.to_owned(), |(_, zh)| (*zh).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_forms() {
        let args = json!({"s":" a ","n":5,"f":1.5,"b":true,"z":null,"blank":"  "});
        assert_eq!(text(&args, "s").as_deref(), Some(" a "));
        assert_eq!(text(&args, "n").as_deref(), Some("5"));
        assert_eq!(text(&args, "f").as_deref(), Some("1.5"));
        assert_eq!(text(&args, "b").as_deref(), Some("true"));
        assert_eq!(text(&args, "z"), None);
        assert_eq!(text(&args, "missing"), None);
        assert_eq!(non_blank(&args, "s").as_deref(), Some("a"));
        assert_eq!(non_blank(&args, "blank"), None);
        assert_eq!(first_non_blank(&args, &["blank", "z", "n"]).as_deref(), Some("5"));
    }

    #[test]
    fn city_translation() {
        assert_eq!(translate_city(Some(" Shanghai ")), "上海");
        assert_eq!(translate_city(Some("XI'AN")), "西安");
        assert_eq!(translate_city(Some("New York")), "纽约");
        assert_eq!(translate_city(Some(" Atlantis ")), "Atlantis");
        assert_eq!(translate_city(Some("  ")), "上海");
        assert_eq!(translate_city(None), "上海");
    }
}
