//! The deterministic random source of the `mock_*` tools (docs/contract/tools-skills-viewports.md §4.8):
//! `java.util.Random` seeded from a Java-style rendering of the arguments, reproduced exactly so
//! that equal arguments give the reference's results.

use serde_json::{Map, Value};

const MULTIPLIER: u64 = 0x5_DEEC_E66D;
const ADDEND: u64 = 0xB;
const MASK: u64 = (1 << 48) - 1;

/// `java.util.Random`: a 48-bit linear congruential generator.
#[derive(Debug, Clone)]
pub(crate) struct JavaRandom {
    state: u64,
}

impl JavaRandom {
    pub(crate) fn new(seed: i64) -> JavaRandom {
        JavaRandom { state: (seed as u64 ^ MULTIPLIER) & MASK }
    }

    /// The generator the mock tools use for these arguments.
    pub(crate) fn for_args(args: &Value) -> JavaRandom {
        JavaRandom::new(seed_of(&seed_string(args)))
    }

    fn next(&mut self, bits: u32) -> i32 {
        self.state = (self.state.wrapping_mul(MULTIPLIER).wrapping_add(ADDEND)) & MASK;
        // Java: `(int)(seed >>> (48 - bits))`, i.e. the low 32 bits reinterpreted as signed.
        (self.state >> (48 - bits)) as u32 as i32
    }

    /// `nextInt(bound)` for `bound > 0`.
    pub(crate) fn next_int(&mut self, bound: i32) -> i32 {
        debug_assert!(bound > 0);
        if bound & bound.wrapping_neg() == bound {
            return ((i64::from(bound) * i64::from(self.next(31))) >> 31) as i32;
        }
        loop {
            let bits = self.next(31);
            let value = bits % bound;
            // Java rejects the last, incomplete range through int overflow.
            if bits.wrapping_sub(value).wrapping_add(bound - 1) >= 0 {
                return value;
            }
        }
    }

    /// `nextInt(bound)` as an index into a slice of that length.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        let bound = i32::try_from(items.len()).unwrap_or(i32::MAX);
        &items[self.next_int(bound) as usize]
    }

    pub(crate) fn next_bool(&mut self) -> bool {
        self.next(1) != 0
    }
}

/// `s = s*31 + b` over the UTF-8 bytes taken as signed bytes, wrapping at 64 bits.
pub(crate) fn seed_of(text: &str) -> i64 {
    text.bytes().fold(0i64, |s, b| s.wrapping_mul(31).wrapping_add(i64::from(b as i8)))
}

/// The arguments rendered like Java's `TreeMap.toString()`: keys sorted by UTF-16 code units,
/// `{k1=v1, k2=v2}`; nested values like `LinkedHashMap` / `ArrayList`.
pub(crate) fn seed_string(args: &Value) -> String {
    match args {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            render_entries(entries)
        }
        _ => "{}".to_owned(),
    }
}

fn render_entries<'a>(entries: impl IntoIterator<Item = (&'a String, &'a Value)>) -> String {
    let parts: Vec<String> = entries.into_iter().map(|(k, v)| format!("{k}={}", java_to_string(v))).collect();
    format!("{{{}}}", parts.join(", "))
}

/// `String.valueOf` of the value Jackson would have produced for this JSON.
pub(crate) fn java_to_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => java_double_to_string(f),
            _ => n.to_string(),
        },
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(java_to_string).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => render_object(map),
    }
}

fn render_object(map: &Map<String, Value>) -> String {
    render_entries(map.iter())
}

/// Java's `Double.toString`: plain decimal with at least one fraction digit for
/// `1e-3 <= |d| < 1e7`, otherwise `<mantissa>E<exponent>` with at least one fraction digit.
/// Both use the shortest digits that round-trip, as Rust's formatting does.
pub(crate) fn java_double_to_string(d: f64) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() { "-0.0".to_owned() } else { "0.0".to_owned() };
    }
    let magnitude = d.abs();
    if (1e-3..1e7).contains(&magnitude) {
        let plain = format!("{d}");
        if plain.contains('.') { plain } else { format!("{plain}.0") }
    } else {
        let scientific = format!("{d:e}");
        let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific.as_str(), "0"));
        let mantissa = if mantissa.contains('.') { mantissa.to_owned() } else { format!("{mantissa}.0") };
        format!("{mantissa}E{exponent}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_seed_example() {
        let args = json!({"date":"2026-02-09","city":"Shanghai"});
        assert_eq!(seed_string(&args), "{city=Shanghai, date=2026-02-09}");
        assert_eq!(seed_of("{city=Shanghai, date=2026-02-09}"), 5414250787351026299);
    }

    #[test]
    fn java_random_matches_known_sequences() {
        // Known outputs of java.util.Random(42).
        let mut random = JavaRandom::new(42);
        assert_eq!(random.next_int(10), 0);
        assert_eq!(random.next_int(10), 3);
        assert_eq!(random.next_int(10), 8);
        let mut random = JavaRandom::new(42);
        assert_eq!(random.next(32), -1170105035);
        assert_eq!(random.next(32), 234785527);
        let mut random = JavaRandom::new(0);
        assert_eq!(random.next_int(100), 60);
        assert_eq!(random.next_int(16), 13);
    }

    #[test]
    fn seed_string_renders_like_java() {
        assert_eq!(seed_string(&json!({})), "{}");
        assert_eq!(seed_string(&json!(null)), "{}");
        let args = json!({"b":[1,"x",null,true],"a":{"z":1.5,"y":{"k":"v"}},"c":1e7,"d":0.0001,"e":-2.0,"f":12});
        assert_eq!(seed_string(&args), "{a={z=1.5, y={k=v}}, b=[1, x, null, true], c=1.0E7, d=1.0E-4, e=-2.0, f=12}");
        // UTF-16 order: an astral character (surrogate 0xD83D) sorts before U+FFFD.
        let args = json!({"\u{FFFD}":1,"😀":2});
        assert_eq!(seed_string(&args), "{😀=2, \u{FFFD}=1}");
    }

    #[test]
    fn double_rendering() {
        for (d, s) in [
            (1.0, "1.0"),
            (0.001, "0.001"),
            (1234567.5, "1234567.5"),
            (1e7, "1.0E7"),
            (1.25e-5, "1.25E-5"),
            (-0.0, "-0.0"),
            (9.999e-4, "9.999E-4"),
            (123.456, "123.456"),
        ] {
            assert_eq!(java_double_to_string(d), s);
        }
    }
}
