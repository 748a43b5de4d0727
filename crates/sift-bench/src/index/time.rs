//! RFC 3339 timestamps to epoch milliseconds, for engines of the benchmark that compare
//! `created_at` as a time (the reference engine, the RocksDB peer). Accepts
//! `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (`t`/`z`/space accepted as in RFC 3339 §5.6).

/// Days from 1970-01-01 to the civil date (proleptic Gregorian; H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `text` as epoch milliseconds, or `None` when it is not an RFC 3339 date-time. Fractions
/// below a millisecond are truncated toward the past.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = bytes.get(range)?;
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        digits
            .iter()
            .try_fold(0_i64, |total, &d| Some(total * 10 + i64::from(d - b'0')))
    };
    let expect =
        |index: usize, allowed: &[u8]| bytes.get(index).is_some_and(|b| allowed.contains(b));
    if !(expect(4, b"-")
        && expect(7, b"-")
        && expect(10, b"Tt ")
        && expect(13, b":")
        && expect(16, b":"))
    {
        return None;
    }
    let year = number(0..4)?;
    let month = number(5..7)?;
    let day = number(8..10)?;
    let hour = number(11..13)?;
    let minute = number(14..16)?;
    let second = number(17..19)?;
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut index = 19;
    let mut millis = 0;
    if expect(index, b".") {
        index += 1;
        let start = index;
        while bytes.get(index).is_some_and(u8::is_ascii_digit) {
            index += 1;
        }
        if index == start {
            return None;
        }
        // First three digits of the fraction, right-padded with zeros.
        for position in 0..3 {
            millis *= 10;
            if let Some(&digit) = bytes
                .get(start + position)
                .filter(|_| start + position < index)
            {
                millis += i64::from(digit - b'0');
            }
        }
    }
    let offset_minutes = match bytes.get(index) {
        Some(b'Z' | b'z') if bytes.len() == index + 1 => 0,
        Some(&sign @ (b'+' | b'-')) if bytes.len() == index + 6 && expect(index + 3, b":") => {
            let hours = number(index + 1..index + 3)?;
            let minutes = number(index + 4..index + 6)?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let total = hours * 60 + minutes;
            if sign == b'+' {
                total
            } else {
                -total
            }
        }
        _ => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_workload::format_rfc3339_seconds;

    #[test]
    fn parses_what_the_generator_writes() {
        for epoch_ms in [
            0_i64,
            1_506_816_005_000,
            951_782_400_000,
            1_704_067_199_000,
            -1000,
            -86_400_000 * 365 * 300,
        ] {
            let text = format_rfc3339_seconds(epoch_ms);
            assert_eq!(parse_rfc3339_ms(&text), Some(epoch_ms), "{text}");
        }
    }

    #[test]
    fn fractions_offsets_and_rejections() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.2349Z"), Some(1234));
        assert_eq!(parse_rfc3339_ms("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_rfc3339_ms("1969-12-31t23:00:00-01:00"), Some(0));
        for bad in [
            "",
            "1970-01-01",
            "1970-01-01T00:00:00",
            "1970-13-01T00:00:00Z",
            "1970-02-30T00:00:00Z",
            "1970-01-01T24:00:00Z",
            "1970-01-01T00:00:00.Z",
            "1970-01-01T00:00:00Zjunk",
            "1970-01-01T00:00:00+0100",
            "197a-01-01T00:00:00Z",
            "1970-01-01T00:00:00+25:00",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad:?}");
        }
        assert_eq!(
            parse_rfc3339_ms("2000-02-29T00:00:00Z"),
            Some(951_782_400_000)
        );
        assert_eq!(parse_rfc3339_ms("1900-02-29T00:00:00Z"), None);
    }
}
