//! Chinese lunar calendar dates for 1900-01-31 … 2100-12-31 (docs/contract/tools-skills-viewports.md §4.6),
//! by the usual year-table method.

use jiff::civil::Date;

/// Text for dates outside the table ("out of supported range").
pub(crate) const OUT_OF_RANGE: &str = "超出支持范围";

/// One entry per lunar year from 1900: bits 0–3 = leap month (0 = none), bit 16 = the leap month
/// has 30 days, bit `16 - m` = month `m` has 30 days.
const YEAR_INFO: [u32; 201] = [
    0x04bd8, 0x04ae0, 0x0a570, 0x054d5, 0x0d260, 0x0d950, 0x16554, 0x056a0, 0x09ad0, 0x055d2, // 1900
    0x04ae0, 0x0a5b6, 0x0a4d0, 0x0d250, 0x1d255, 0x0b540, 0x0d6a0, 0x0ada2, 0x095b0, 0x14977, // 1910
    0x04970, 0x0a4b0, 0x0b4b5, 0x06a50, 0x06d40, 0x1ab54, 0x02b60, 0x09570, 0x052f2, 0x04970, // 1920
    0x06566, 0x0d4a0, 0x0ea50, 0x06e95, 0x05ad0, 0x02b60, 0x186e3, 0x092e0, 0x1c8d7, 0x0c950, // 1930
    0x0d4a0, 0x1d8a6, 0x0b550, 0x056a0, 0x1a5b4, 0x025d0, 0x092d0, 0x0d2b2, 0x0a950, 0x0b557, // 1940
    0x06ca0, 0x0b550, 0x15355, 0x04da0, 0x0a5d0, 0x14573, 0x052d0, 0x0a9a8, 0x0e950, 0x06aa0, // 1950
    0x0aea6, 0x0ab50, 0x04b60, 0x0aae4, 0x0a570, 0x05260, 0x0f263, 0x0d950, 0x05b57, 0x056a0, // 1960
    0x096d0, 0x04dd5, 0x04ad0, 0x0a4d0, 0x0d4d4, 0x0d250, 0x0d558, 0x0b540, 0x0b5a0, 0x195a6, // 1970
    0x095b0, 0x049b0, 0x0a974, 0x0a4b0, 0x0b27a, 0x06a50, 0x06d40, 0x0af46, 0x0ab60, 0x09570, // 1980
    0x04af5, 0x04970, 0x064b0, 0x074a3, 0x0ea50, 0x06b58, 0x05ac0, 0x0ab60, 0x096d5, 0x092e0, // 1990
    0x0c960, 0x0d954, 0x0d4a0, 0x0da50, 0x07552, 0x056a0, 0x0abb7, 0x025d0, 0x092d0, 0x0cab5, // 2000
    0x0a950, 0x0b4a0, 0x0baa4, 0x0ad50, 0x055d9, 0x04ba0, 0x0a5b0, 0x15176, 0x052b0, 0x0a930, // 2010
    0x07954, 0x06aa0, 0x0ad50, 0x05b52, 0x04b60, 0x0a6e6, 0x0a4e0, 0x0d260, 0x0ea65, 0x0d530, // 2020
    0x05aa0, 0x076a3, 0x096d0, 0x04bd7, 0x04ad0, 0x0a4d0, 0x1d0b6, 0x0d250, 0x0d520, 0x0dd45, // 2030
    0x0b5a0, 0x056d0, 0x055b2, 0x049b0, 0x0a577, 0x0a4b0, 0x0aa50, 0x1b255, 0x06d20, 0x0ada0, // 2040
    0x14b63, 0x09370, 0x049f8, 0x04970, 0x064b0, 0x168a6, 0x0ea50, 0x06b20, 0x1a6c4, 0x0aae0, // 2050
    0x0a2e0, 0x0d2e3, 0x0c960, 0x0d557, 0x0d4a0, 0x0da50, 0x05d55, 0x056a0, 0x0a6d0, 0x055d4, // 2060
    0x052d0, 0x0a9b8, 0x0a950, 0x0b4a0, 0x0b6a6, 0x0ad50, 0x055a0, 0x0aba4, 0x0a5b0, 0x052b0, // 2070
    0x0b273, 0x06930, 0x07337, 0x06aa0, 0x0ad50, 0x14b55, 0x04b60, 0x0a570, 0x054e4, 0x0d160, // 2080
    0x0e968, 0x0d520, 0x0daa0, 0x16aa6, 0x056d0, 0x04ae0, 0x0a9d4, 0x0a2d0, 0x0d150, 0x0f252, // 2090
    0x0d520, // 2100
];

const FIRST_YEAR: i32 = 1900;
const STEMS: [&str; 10] = ["甲", "乙", "丙", "丁", "戊", "己", "庚", "辛", "壬", "癸"];
const BRANCHES: [&str; 12] = ["子", "丑", "寅", "卯", "辰", "巳", "午", "未", "申", "酉", "戌", "亥"];
const MONTHS: [&str; 12] = ["正", "二", "三", "四", "五", "六", "七", "八", "九", "十", "冬", "腊"];
const DAY_TENS: [&str; 4] = ["初", "十", "廿", "三"];
const DAY_UNITS: [&str; 10] = ["一", "二", "三", "四", "五", "六", "七", "八", "九", "十"];

/// A date in the lunar calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LunarDate {
    pub year: i32,
    pub month: u32,
    pub leap: bool,
    pub day: u32,
}

impl LunarDate {
    /// The lunar date of a Gregorian date, `None` outside the table's range.
    pub(crate) fn from_gregorian(date: Date) -> Option<LunarDate> {
        let first = jiff::civil::date(1900, 1, 31);
        if date < first || date > jiff::civil::date(2100, 12, 31) {
            return None;
        }
        let mut offset = i64::from(date.since(first).ok()?.get_days());
        let mut year = FIRST_YEAR;
        loop {
            let days = i64::from(year_days(year_info(year)?));
            if offset < days {
                break;
            }
            offset -= days;
            year += 1;
        }
        let info = year_info(year)?;
        for (month, leap, days) in months_of(info) {
            let days = i64::from(days);
            if offset < days {
                let day = u32::try_from(offset + 1).ok()?;
                return Some(LunarDate { year, month, leap, day });
            }
            offset -= days;
        }
        None
    }

    /// E.g. `乙巳年腊月廿六`, `癸卯年闰二月初一`.
    pub(crate) fn to_chinese(self) -> String {
        let cycle = self.year - 4;
        let stem = STEMS[cycle.rem_euclid(10) as usize];
        let branch = BRANCHES[cycle.rem_euclid(12) as usize];
        let leap = if self.leap { "闰" } else { "" };
        let month = MONTHS[(self.month as usize - 1) % 12];
        format!("{stem}{branch}年{leap}{month}月{}", day_name(self.day))
    }
}

/// The text for a Gregorian date: the lunar date or [`OUT_OF_RANGE`].
pub(crate) fn lunar_text(date: Date) -> String {
    LunarDate::from_gregorian(date).map_or_else(|| OUT_OF_RANGE.to_owned(), LunarDate::to_chinese)
}

fn day_name(day: u32) -> String {
    match day {
        10 => "初十".to_owned(),
        20 => "二十".to_owned(),
        30 => "三十".to_owned(),
        _ => {
            let d = day as usize;
            format!("{}{}", DAY_TENS[(d / 10).min(3)], DAY_UNITS[(d % 10 + 9) % 10])
        }
    }
}

fn year_info(year: i32) -> Option<u32> {
    usize::try_from(year - FIRST_YEAR).ok().and_then(|i| YEAR_INFO.get(i)).copied()
}

/// `(month, is_leap, days)` of a lunar year in order, the leap month right after its namesake.
fn months_of(info: u32) -> impl Iterator<Item = (u32, bool, u32)> {
    let leap_month = info & 0xf;
    (1..=12u32).flat_map(move |month| {
        let regular = (month, false, if info & (0x10000 >> month) != 0 { 30 } else { 29 });
        let leap = (month == leap_month).then_some((month, true, leap_days(info)));
        std::iter::once(regular).chain(leap)
    })
}

fn leap_days(info: u32) -> u32 {
    if info & 0x10000 != 0 { 30 } else { 29 }
}

/// 348 days plus one for each 30-day month (bits 0x8000..=0x10), plus the leap month.
fn year_days(info: u32) -> u32 {
    let leap = if info & 0xf != 0 { leap_days(info) } else { 0 };
    348 + (info & 0xfff0).count_ones() + leap
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    #[test]
    fn spec_vectors() {
        assert_eq!(lunar_text(date(2026, 2, 13)), "乙巳年腊月廿六");
        assert_eq!(lunar_text(date(2026, 2, 17)), "丙午年正月初一");
        assert_eq!(lunar_text(date(2025, 1, 29)), "乙巳年正月初一");
        assert_eq!(lunar_text(date(2023, 3, 22)), "癸卯年闰二月初一");
        assert_eq!(lunar_text(date(1900, 1, 31)), "庚子年正月初一");
        assert_eq!(lunar_text(date(1900, 1, 30)), OUT_OF_RANGE);
        assert_eq!(lunar_text(date(2101, 2, 1)), OUT_OF_RANGE);
    }

    #[test]
    fn more_known_dates() {
        // Well-known Chinese New Year days and the last supported date.
        assert_eq!(lunar_text(date(2000, 2, 5)), "庚辰年正月初一");
        assert_eq!(lunar_text(date(2024, 2, 10)), "甲辰年正月初一");
        assert_eq!(lunar_text(date(2023, 4, 19)), "癸卯年闰二月廿九");
        assert_eq!(lunar_text(date(2023, 4, 20)), "癸卯年三月初一");
    }

    #[test]
    fn every_supported_day_follows_the_previous_one() {
        let mut day = date(1900, 1, 31);
        let mut previous = LunarDate::from_gregorian(day).unwrap();
        while day < date(2100, 12, 31) {
            day = day.tomorrow().unwrap();
            let next = LunarDate::from_gregorian(day).unwrap();
            let same_month = next.year == previous.year && next.month == previous.month && next.leap == previous.leap;
            if same_month {
                assert_eq!(next.day, previous.day + 1, "{day}");
            } else {
                assert_eq!(next.day, 1, "{day}");
                assert!((29..=30).contains(&previous.day), "{day}");
                let new_year = next.year == previous.year + 1 && next.month == 1 && previous.month == 12;
                let leap_follows = next.leap && next.month == previous.month;
                let month_follows = !next.leap && next.year == previous.year && next.month == previous.month + 1;
                assert!(new_year || leap_follows || month_follows, "{day}: {previous:?} -> {next:?}");
            }
            previous = next;
        }
    }

    #[test]
    fn day_names() {
        let names: Vec<String> = [1, 9, 10, 11, 19, 20, 21, 29, 30].into_iter().map(day_name).collect();
        assert_eq!(names, ["初一", "初九", "初十", "十一", "十九", "二十", "廿一", "廿九", "三十"]);
    }

    #[test]
    fn year_lengths_are_plausible_and_match_the_months() {
        for info in YEAR_INFO {
            let days = year_days(info);
            assert!((353..=385).contains(&days), "{info:#x}: {days}");
            assert_eq!(months_of(info).map(|(_, _, d)| d).sum::<u32>(), days, "{info:#x}");
        }
    }
}
