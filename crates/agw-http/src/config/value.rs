//! Parsers of setting values. Each returns a message without the setting's name; the caller
//! ([`super::source::Source::parse`]) adds it.

use std::num::IntErrorKind;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// A whole number of type `T`; overflow says how large it may be instead of wrapping.
pub fn whole<T>(s: &str) -> Result<T, String>
where
    T: FromStr<Err = std::num::ParseIntError> + std::fmt::Display + Bounded,
{
    s.trim().parse::<T>().map_err(|e| match e.kind() {
        IntErrorKind::PosOverflow => format!("too large (at most {})", T::MAX),
        IntErrorKind::NegOverflow => format!("too small (at least {})", T::MIN),
        IntErrorKind::Empty => "expected a whole number, got nothing".into(),
        _ => "expected a whole number".into(),
    })
}

/// The bounds [`whole`] reports.
pub trait Bounded: Sized {
    const MIN: Self;
    const MAX: Self;
}

macro_rules! bounded {
    ($($t:ty),*) => {
        $(impl Bounded for $t {
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
        })*
    };
}
bounded!(u16, u32, u64, usize, i64);

/// A `*-ms` setting: a whole number of milliseconds.
pub fn millis(s: &str) -> Result<Duration, String> {
    whole::<u64>(s).map(Duration::from_millis)
}

/// `15s`, `500ms`, `5m`, `1h`, or a bare number of milliseconds. Too large a value is an error,
/// never a wrapped or saturated duration.
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit()).map_or((s, ""), |i| s.split_at(i));
    let n: u64 = num.parse().map_err(|e: std::num::ParseIntError| match e.kind() {
        IntErrorKind::PosOverflow => format!("duration {s:?} is too large"),
        _ => format!("invalid duration {s:?}"),
    })?;
    let per_unit: u64 = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => return Err(format!("unknown duration unit {other:?} (use ms, s, m or h)")),
    };
    let ms = n.checked_mul(per_unit).ok_or_else(|| format!("duration {s:?} is too large (at most {} ms)", u64::MAX))?;
    Ok(Duration::from_millis(ms))
}

pub fn bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

/// Comma-separated list; items trimmed, blanks dropped.
pub fn list(s: &str) -> Result<Vec<String>, String> {
    Ok(s.split(',').map(str::trim).filter(|i| !i.is_empty()).map(str::to_string).collect())
}

/// Like [`list`], but a comma inside `[...]` (a port list, `http://localhost:[3000,5173]`) does
/// not split.
pub fn origin_list(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    Ok(out.into_iter().map(str::trim).filter(|i| !i.is_empty()).map(str::to_string).collect())
}

pub fn path(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

pub fn text(s: &str) -> Result<String, String> {
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(duration("100").unwrap(), Duration::from_millis(100));
        assert!(duration("x").is_err());
    }

    #[test]
    fn overflowing_durations_are_errors_not_wraps() {
        // u64::MAX / 1000 + 1 seconds does not fit in u64 milliseconds (wrapped before).
        let e = duration("18446744073709552s").unwrap_err();
        assert!(e.contains("too large"), "{e}");
        let e = duration("99999999999999999999ms").unwrap_err();
        assert!(e.contains("too large"), "{e}");
        assert_eq!(duration("18446744073709551s").unwrap(), Duration::from_millis(18_446_744_073_709_551_000));
        let e = millis("18446744073709551616").unwrap_err();
        assert_eq!(e, "too large (at most 18446744073709551615)");
        assert_eq!(millis(" 42 ").unwrap(), Duration::from_millis(42));
        assert_eq!(whole::<u16>("70000").unwrap_err(), "too large (at most 65535)");
        assert_eq!(whole::<u64>("-1").unwrap_err(), "expected a whole number");
    }

    #[test]
    fn lists() {
        assert_eq!(list(" a, ,b ").unwrap(), ["a", "b"]);
        assert_eq!(origin_list("http://x:[1, 2],https://y").unwrap(), ["http://x:[1, 2]", "https://y"]);
    }
}
