//! Parsers of setting values. Each error says what is wrong without the setting's name; the
//! caller ([`super::source::Source::parse`]) adds it. Parsers that cannot fail say so with
//! [`Infallible`], so that every parser has the shape `Source::parse` takes.

use std::convert::Infallible;
use std::num::IntErrorKind;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// Why a setting's text is not a value of its kind. The display text is the message the
/// setting's [`super::ConfigError::Invalid`] carries (after the value itself), and what
/// `--shutdown-grace`-style command-line options print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A whole number above its type's maximum, which it carries.
    #[error("too large (at most {max})")]
    TooLarge {
        /// The largest value of the setting's type.
        max: i128,
    },
    /// A whole number below its type's minimum, which it carries.
    #[error("too small (at least {min})")]
    TooSmall {
        /// The smallest value of the setting's type.
        min: i128,
    },
    /// Blank where a whole number was expected.
    #[error("expected a whole number, got nothing")]
    NoNumber,
    /// Not a duration (the trimmed text).
    #[error("invalid duration {0:?}")]
    InvalidDuration(String),
    /// A duration whose number does not fit in 64 bits (the trimmed text).
    #[error("duration {0:?} is too large")]
    DurationTooLarge(String),
    /// A duration whose milliseconds do not fit in 64 bits (the trimmed text).
    #[error("duration {0:?} is too large (at most {max} ms)", max = u64::MAX)]
    DurationOverflow(String),
    /// A duration unit other than `ms`, `s`, `m` and `h`; carries it.
    #[error("unknown duration unit {0:?} (use ms, s, m or h)")]
    DurationUnit(String),
    /// Not one of the values the setting takes; carries what it takes (`true or false`).
    #[error("expected {0}")]
    Expected(&'static str),
    /// An item of a list that is not what the list holds (`"GE T" is not an HTTP method`).
    #[error("{item:?} is not {kind}")]
    Item {
        /// The item as written.
        item: String,
        /// What the list holds, with its article.
        kind: &'static str,
    },
}

/// A whole number of type `T`; overflow says how large it may be instead of wrapping.
pub fn whole<T>(s: &str) -> Result<T, ValueError>
where
    T: FromStr<Err = std::num::ParseIntError> + Bounded,
{
    s.trim().parse::<T>().map_err(|e| match e.kind() {
        IntErrorKind::PosOverflow => ValueError::TooLarge { max: T::MAX.widen() },
        IntErrorKind::NegOverflow => ValueError::TooSmall { min: T::MIN.widen() },
        IntErrorKind::Empty => ValueError::NoNumber,
        _ => ValueError::Expected("a whole number"),
    })
}

/// The bounds [`whole`] reports.
pub trait Bounded: Sized {
    const MIN: Self;
    const MAX: Self;
    /// The value as an `i128`, which holds every value of every bounded type.
    fn widen(self) -> i128;
}

macro_rules! bounded {
    ($($t:ty),*) => {
        $(impl Bounded for $t {
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            fn widen(self) -> i128 {
                i128::try_from(self).unwrap_or(i128::MAX)
            }
        })*
    };
}
bounded!(u16, u32, u64, usize, i64);

/// A `*-ms` setting: a whole number of milliseconds.
pub fn millis(s: &str) -> Result<Duration, ValueError> {
    whole::<u64>(s).map(Duration::from_millis)
}

/// `15s`, `500ms`, `5m`, `1h`, or a bare number of milliseconds. Too large a value is an error,
/// never a wrapped or saturated duration.
pub fn duration(s: &str) -> Result<Duration, ValueError> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit()).map_or((s, ""), |i| s.split_at(i));
    let n: u64 = num.parse().map_err(|e: std::num::ParseIntError| match e.kind() {
        IntErrorKind::PosOverflow => ValueError::DurationTooLarge(s.to_owned()),
        _ => ValueError::InvalidDuration(s.to_owned()),
    })?;
    let per_unit: u64 = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => return Err(ValueError::DurationUnit(other.to_owned())),
    };
    let ms = n.checked_mul(per_unit).ok_or_else(|| ValueError::DurationOverflow(s.to_owned()))?;
    Ok(Duration::from_millis(ms))
}

pub fn bool(s: &str) -> Result<bool, ValueError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(ValueError::Expected("true or false")),
    }
}

/// Comma-separated list; items trimmed, blanks dropped.
pub fn list(s: &str) -> Result<Vec<String>, Infallible> {
    Ok(s.split(',').map(str::trim).filter(|i| !i.is_empty()).map(str::to_string).collect())
}

/// Like [`list`], but a comma inside `[...]` (a port list, `http://localhost:[3000,5173]`) does
/// not split.
pub fn origin_list(s: &str) -> Result<Vec<String>, Infallible> {
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

pub fn path(s: &str) -> Result<PathBuf, Infallible> {
    Ok(PathBuf::from(s))
}

pub fn text(s: &str) -> Result<String, Infallible> {
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
        let e = duration("18446744073709552s").unwrap_err().to_string();
        assert_eq!(e, "duration \"18446744073709552s\" is too large (at most 18446744073709551615 ms)");
        let e = duration("99999999999999999999ms").unwrap_err().to_string();
        assert_eq!(e, "duration \"99999999999999999999ms\" is too large");
        assert_eq!(duration("18446744073709551s").unwrap(), Duration::from_millis(18_446_744_073_709_551_000));
        let e = millis("18446744073709551616").unwrap_err().to_string();
        assert_eq!(e, "too large (at most 18446744073709551615)");
        assert_eq!(millis(" 42 ").unwrap(), Duration::from_millis(42));
        assert_eq!(whole::<u16>("70000").unwrap_err().to_string(), "too large (at most 65535)");
        assert_eq!(
            whole::<i64>("-9223372036854775809").unwrap_err().to_string(),
            "too small (at least -9223372036854775808)"
        );
        assert_eq!(whole::<u64>("-1").unwrap_err().to_string(), "expected a whole number");
        assert_eq!(whole::<u64>(" ").unwrap_err().to_string(), "expected a whole number, got nothing");
        assert_eq!(duration("5 d").unwrap_err().to_string(), "unknown duration unit \"d\" (use ms, s, m or h)");
        assert_eq!(duration("x").unwrap_err().to_string(), "invalid duration \"x\"");
        assert_eq!(bool("maybe").unwrap_err().to_string(), "expected true or false");
    }

    #[test]
    fn lists() {
        assert_eq!(list(" a, ,b ").unwrap(), ["a", "b"]);
        assert_eq!(origin_list("http://x:[1, 2],https://y").unwrap(), ["http://x:[1, 2]", "https://y"]);
    }
}
