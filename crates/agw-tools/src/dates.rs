//! `yyyy-MM-dd` civil dates, shared by templates and the mock tools.

use jiff::civil::Date;

/// Parses exactly `yyyy-MM-dd` (four-digit year) into a valid date.
pub(crate) fn parse_ymd(text: &str) -> Option<Date> {
    let bytes = text.as_bytes();
    let shape_ok = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes.iter().enumerate().all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit());
    if !shape_ok {
        return None;
    }
    let year: i16 = text[0..4].parse().ok()?;
    let month: i8 = text[5..7].parse().ok()?;
    let day: i8 = text[8..10].parse().ok()?;
    Date::new(year, month, day).ok()
}

pub(crate) fn format_ymd(date: Date) -> String {
    format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day())
}

/// `None` when the result leaves the supported range (years -9999..=9999).
pub(crate) fn add_days(date: Date, days: i64) -> Option<Date> {
    let span = jiff::Span::new().try_days(days).ok()?;
    date.checked_add(span).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_parsing() {
        assert_eq!(parse_ymd("2026-02-13").map(format_ymd).as_deref(), Some("2026-02-13"));
        for bad in ["2026-2-13", "2026-02-30", "20260213", "2026-02-13T00:00", "+2026-02-13", "２０２６-02-13", ""]
        {
            assert_eq!(parse_ymd(bad), None, "{bad}");
        }
    }

    #[test]
    fn arithmetic() {
        let date = parse_ymd("2024-02-28").unwrap();
        assert_eq!(format_ymd(add_days(date, 1).unwrap()), "2024-02-29");
        assert_eq!(format_ymd(add_days(date, -59).unwrap()), "2023-12-31");
        assert_eq!(add_days(date, 10_000_000), None);
        assert_eq!(add_days(date, i64::MAX), None);
    }
}
