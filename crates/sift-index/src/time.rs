//! RFC 3339 timestamps to and from epoch milliseconds (proleptic Gregorian calendar, UTC).
//!
//! Small enough to own rather than pull in a date crate: the index only needs "text with an
//! offset" → "milliseconds since 1970-01-01T00:00:00Z" and back.

/// Days from 1970-01-01 to the given civil date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400; // [0, 399]
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Inverse of [`days_from_civil`]: (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097; // [0, 146096]
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // [0, 11], March first
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap_year(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A cursor over the ASCII text of a timestamp.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, count: usize, what: &str) -> Result<u32, String> {
        let mut value = 0u32;
        for _ in 0..count {
            match self.bytes.get(self.pos) {
                Some(byte) if byte.is_ascii_digit() => {
                    value = value * 10 + u32::from(byte - b'0');
                    self.pos += 1;
                }
                _ => {
                    return Err(format!(
                        "expected {count} digits of {what} at character {}",
                        self.pos
                    ))
                }
            }
        }
        Ok(value)
    }

    fn expect(&mut self, allowed: &[u8], what: &str) -> Result<u8, String> {
        match self.bytes.get(self.pos) {
            Some(byte) if allowed.contains(byte) => {
                self.pos += 1;
                Ok(*byte)
            }
            _ => Err(format!("expected {what} at character {}", self.pos)),
        }
    }
}

/// Parses an RFC 3339 `date-time` (`2020-01-01T00:00:00Z`, `2020-01-01T01:00:00.5+01:00`; `t`,
/// `z` and a space separator are accepted too) into epoch milliseconds. Fractional seconds
/// beyond milliseconds are truncated toward the past. A leap second (`:60`) counts as the first
/// second of the next minute. Returns a reason on failure.
pub(crate) fn parse_rfc3339_ms(text: &str) -> Result<i64, String> {
    if let Some(epoch_ms) = parse_common_utc_ms_remembering(text.as_bytes()) {
        return Ok(epoch_ms);
    }
    parse_general_ms(text)
}

thread_local! {
    /// The minute the common form last parsed on this thread: its 16 bytes
    /// `YYYY-MM-DDTHH:MM` (little-endian; never 0, as `-` is not a zero byte) and its epoch
    /// milliseconds.
    static LAST_MINUTE: std::cell::Cell<(u128, i64)> = const { std::cell::Cell::new((0, 0)) };
}

/// [`parse_common_utc_ms`], remembering the last minute (per thread): documents written in
/// time order repeat it, and then only the seconds and the fraction are read (the minute's
/// fields were checked and converted when it was parsed in full).
#[inline]
fn parse_common_utc_ms_remembering(bytes: &[u8]) -> Option<i64> {
    let head = bytes.first_chunk::<19>()?;
    let minute_key = u128::from_le_bytes(*head.first_chunk::<16>()?);
    let (last_key, last_minute_ms) = LAST_MINUTE.get();
    if minute_key == last_key {
        let millis = common_millis(&bytes[19..])?;
        let tens = u32::from(head[17].wrapping_sub(b'0'));
        let ones = u32::from(head[18].wrapping_sub(b'0'));
        let second = tens * 10 + ones;
        if head[16] != b':' || tens > 9 || ones > 9 || second > 60 {
            return None;
        }
        return Some(last_minute_ms + i64::from(second * 1000 + millis));
    }
    let (minute_ms, second, millis) = common_parts(bytes)?;
    LAST_MINUTE.set((minute_key, minute_ms));
    Some(minute_ms + i64::from(second * 1000 + millis))
}

/// The milliseconds of the common forms' ending, `Z` or `.fffZ`.
#[inline]
fn common_millis(end: &[u8]) -> Option<u32> {
    match *end {
        [b'Z'] => Some(0),
        [b'.', a, b, c, b'Z'] => {
            let digits = [a, b, c].map(|byte| u32::from(byte.wrapping_sub(b'0')));
            if digits.iter().any(|&value| value > 9) {
                return None;
            }
            Some(digits[0] * 100 + digits[1] * 10 + digits[2])
        }
        _ => None,
    }
}

/// The common forms' 19 bytes `YYYY-MM-DDTHH:MM:SS` as (year, month, day, hour, minute,
/// second), or `None` if a digit or separator is not where the form has it. Branch-free digit
/// checks: every byte is read, one test at the end.
#[inline]
fn common_fields(head: &[u8; 19]) -> Option<(u32, u32, u32, u32, u32, u32)> {
    let mut bad = 0u32;
    let mut digit = |byte: u8| {
        let value = u32::from(byte.wrapping_sub(b'0'));
        bad |= u32::from(value > 9);
        value
    };
    let year = digit(head[0]) * 1000 + digit(head[1]) * 100 + digit(head[2]) * 10 + digit(head[3]);
    let month = digit(head[5]) * 10 + digit(head[6]);
    let day = digit(head[8]) * 10 + digit(head[9]);
    let hour = digit(head[11]) * 10 + digit(head[12]);
    let minute = digit(head[14]) * 10 + digit(head[15]);
    let second = digit(head[17]) * 10 + digit(head[18]);
    let separators_ok = head[4] == b'-'
        && head[7] == b'-'
        && head[10] == b'T'
        && head[13] == b':'
        && head[16] == b':';
    (bad == 0 && separators_ok).then_some((year, month, day, hour, minute, second))
}

/// The write path's common forms, `YYYY-MM-DDTHH:MM:SSZ` and `YYYY-MM-DDTHH:MM:SS.fffZ`
/// (upper-case `T` and `Z`, fields in range), without the general parser's cursor; `None`
/// for anything else, which [`parse_general_ms`] then decides (so the answers are the same).
#[cfg(test)]
fn parse_common_utc_ms(bytes: &[u8]) -> Option<i64> {
    let (minute_ms, second, millis) = common_parts(bytes)?;
    Some(minute_ms + i64::from(second * 1000 + millis))
}

/// The common forms as (epoch milliseconds of the minute, second, milliseconds).
#[inline]
fn common_parts(bytes: &[u8]) -> Option<(i64, u32, u32)> {
    let head = bytes.first_chunk::<19>()?;
    let millis = common_millis(&bytes[19..])?;
    let (year, month, day, hour, minute, second) = common_fields(head)?;
    let year = i64::from(year);
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let minute_seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60);
    Some((minute_seconds * 1000, second, millis))
}

/// [`parse_rfc3339_ms`] for every accepted form, with the reason on failure.
fn parse_general_ms(text: &str) -> Result<i64, String> {
    let mut cursor = Cursor {
        bytes: text.as_bytes(),
        pos: 0,
    };
    let year = cursor.digits(4, "year")?;
    cursor.expect(b"-", "'-' after the year")?;
    let month = cursor.digits(2, "month")?;
    cursor.expect(b"-", "'-' after the month")?;
    let day = cursor.digits(2, "day")?;
    cursor.expect(b"Tt ", "'T' between date and time")?;
    let hour = cursor.digits(2, "hour")?;
    cursor.expect(b":", "':' after the hour")?;
    let minute = cursor.digits(2, "minute")?;
    cursor.expect(b":", "':' after the minute")?;
    let second = cursor.digits(2, "second")?;
    let mut millis = 0u32;
    if cursor.bytes.get(cursor.pos) == Some(&b'.') {
        cursor.pos += 1;
        let start = cursor.pos;
        while cursor.bytes.get(cursor.pos).is_some_and(u8::is_ascii_digit) {
            let digit = u32::from(cursor.bytes[cursor.pos] - b'0');
            let place = cursor.pos - start;
            if place < 3 {
                millis += digit * 10u32.pow(2 - place as u32);
            }
            cursor.pos += 1;
        }
        if cursor.pos == start {
            return Err("expected digits after the decimal point".to_string());
        }
    }
    let offset_minutes: i64 = match cursor.expect(b"Zz+-", "'Z' or a +HH:MM / -HH:MM offset")? {
        b'+' | b'-' => {
            let sign = if cursor.bytes[cursor.pos - 1] == b'-' {
                -1
            } else {
                1
            };
            let offset_hour = cursor.digits(2, "offset hour")?;
            cursor.expect(b":", "':' in the offset")?;
            let offset_minute = cursor.digits(2, "offset minute")?;
            if offset_hour > 23 || offset_minute > 59 {
                return Err(format!(
                    "offset {offset_hour:02}:{offset_minute:02} out of range"
                ));
            }
            sign * i64::from(offset_hour * 60 + offset_minute)
        }
        _ => 0,
    };
    if cursor.pos != cursor.bytes.len() {
        return Err(format!(
            "unexpected text after the timestamp at character {}",
            cursor.pos
        ));
    }
    let year = i64::from(year);
    if !(1..=12).contains(&month) {
        return Err(format!("month {month} out of range 1..=12"));
    }
    if day == 0 || day > days_in_month(year, month) {
        return Err(format!("day {day} does not exist in {year:04}-{month:02}"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(format!(
            "time {hour:02}:{minute:02}:{second:02} out of range"
        ));
    }
    let days = days_from_civil(year, month, day);
    let seconds =
        days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_minutes * 60;
    Ok(seconds * 1000 + i64::from(millis))
}

/// Formats epoch milliseconds as RFC 3339 in UTC with millisecond precision
/// (`2020-01-01T00:00:00.000Z`). Instants outside years 0000..=9999 have no RFC 3339 form and
/// are written as the integer followed by `ms`.
pub(crate) fn format_rfc3339_ms(epoch_ms: i64) -> String {
    let days = epoch_ms.div_euclid(86_400_000);
    let ms_of_day = epoch_ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return format!("{epoch_ms}ms");
    }
    let hour = ms_of_day / 3_600_000;
    let minute = ms_of_day / 60_000 % 60;
    let second = ms_of_day / 1000 % 60;
    let millis = ms_of_day % 1000;
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_rfc3339_ms("2020-01-01T00:00:00Z"),
            Ok(1_577_836_800_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2020-01-01T01:00:00.5+01:00"),
            Ok(1_577_836_800_500)
        );
        assert_eq!(
            parse_rfc3339_ms("2019-12-31t19:00:00.123456-05:00"),
            Ok(1_577_836_800_123)
        );
        assert_eq!(parse_rfc3339_ms("1969-12-31T23:59:59.999Z"), Ok(-1));
        assert_eq!(
            parse_rfc3339_ms("2000-02-29 12:00:00z"),
            Ok(951_825_600_000)
        );
        assert_eq!(
            parse_rfc3339_ms("0000-01-01T00:00:00Z"),
            Ok(-62_167_219_200_000)
        );
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "2020-01-01",
            "2020-01-01T00:00:00",
            "2020-13-01T00:00:00Z",
            "2021-02-29T00:00:00Z",
            "2020-01-01T24:00:00Z",
            "2020-01-01T00:00:00.Z",
            "2020-01-01T00:00:00+25:00",
            "2020-01-01T00:00:00Zjunk",
            "20-01-01T00:00:00Z",
            "２020-01-01T00:00:00Z",
        ] {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad} accepted");
        }
    }

    /// The common-form fast path answers exactly as the general parser on every input near
    /// the common forms (valid ones, and each byte replaced by a character that may or may
    /// not belong there).
    #[test]
    fn common_form_fast_path_agrees_with_the_general_parser() {
        use rand::{Rng, SeedableRng};
        let seed = 0x7157_u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let alphabet = b"0123456789-:.TtZz+ 9a\xff";
        let mut fast_answers = 0;
        for step in 0..200_000 {
            let ms = rng.gen_range(-62_167_219_200_000i64..253_402_300_799_999);
            let mut text = format_rfc3339_ms(ms).into_bytes();
            if rng.gen_bool(0.5) {
                // Without the fraction: `...SSZ`.
                text.drain(19..23);
            }
            if step % 2 == 1 {
                let position = rng.gen_range(0..text.len());
                text[position] = alphabet[rng.gen_range(0..alphabet.len())];
            }
            let Ok(text) = String::from_utf8(text) else {
                continue;
            };
            let general = parse_general_ms(&text);
            let fast = parse_common_utc_ms(text.as_bytes());
            if let Some(fast) = fast {
                fast_answers += 1;
                assert_eq!(Ok(fast), general, "seed {seed}: {text}");
            }
            assert_eq!(parse_rfc3339_ms(&text), general, "seed {seed}: {text}");
        }
        assert!(
            fast_answers > 100_000,
            "the fast path answered {fast_answers} times"
        );
        // Out-of-range fields the fast path must hand to the general parser.
        for text in [
            "2021-02-29T00:00:00Z",
            "2020-00-10T00:00:00Z",
            "2020-01-01T24:00:00Z",
            "2020-01-01T00:60:00Z",
            "2020-01-01T23:59:61Z",
        ] {
            assert_eq!(parse_common_utc_ms(text.as_bytes()), None, "{text}");
            assert!(parse_rfc3339_ms(text).is_err(), "{text}");
        }
        // Other fraction widths and separators: the general parser's.
        assert_eq!(parse_common_utc_ms(b"2020-01-01T00:00:00.12Z"), None);
        assert_eq!(
            parse_rfc3339_ms("2020-01-01T00:00:00.12Z"),
            Ok(1_577_836_800_120)
        );
        assert_eq!(
            parse_common_utc_ms(b"2016-12-31T23:59:60Z"),
            parse_general_ms("2016-12-31T23:59:60Z").ok()
        );
    }

    /// Runs of timestamps sharing their minute (as time-ordered documents do), some with a
    /// byte of the seconds or the ending changed, then another minute: the remembered minute
    /// gives what the general parser gives.
    #[test]
    fn remembered_minute_agrees_with_the_general_parser() {
        use rand::{Rng, SeedableRng};
        let seed = 0x3171_u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let alphabet = b"0123456789-:.TZz+ 9a";
        let mut remembered = 0;
        for _ in 0..2000 {
            let minute_start =
                rng.gen_range(-62_167_219_200_000i64..253_402_300_700_000) / 60_000 * 60_000;
            for _ in 0..rng.gen_range(1..20) {
                let ms = minute_start + rng.gen_range(0..60_000);
                let mut text = format_rfc3339_ms(ms).into_bytes();
                match rng.gen_range(0..6) {
                    0 => {
                        text.drain(19..23);
                    }
                    1 => {
                        let position = rng.gen_range(16..text.len());
                        text[position] = alphabet[rng.gen_range(0..alphabet.len())];
                    }
                    2 => {
                        // A leap second or an out-of-range one.
                        let second = [b"60", b"61", b"99"][rng.gen_range(0..3)];
                        text[17..19].copy_from_slice(second);
                    }
                    _ => {}
                }
                let Ok(text) = String::from_utf8(text) else {
                    continue;
                };
                let key = u128::from_le_bytes(*text.as_bytes().first_chunk::<16>().unwrap());
                if LAST_MINUTE.get().0 == key {
                    remembered += 1;
                }
                assert_eq!(
                    parse_rfc3339_ms(&text),
                    parse_general_ms(&text),
                    "seed {seed}: {text}"
                );
            }
        }
        assert!(
            remembered > 5000,
            "the remembered minute was used {remembered} times"
        );
    }

    #[test]
    fn format_round_trips_every_day_of_a_range() {
        for day in -800_000i64..800_000 {
            let ms = day * 86_400_000 + 45_296_789; // 12:34:56.789
            let text = format_rfc3339_ms(ms);
            if text.ends_with("ms") {
                continue;
            }
            assert_eq!(parse_rfc3339_ms(&text), Ok(ms), "{text}");
        }
        assert_eq!(format_rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_rfc3339_ms(i64::MIN), format!("{}ms", i64::MIN));
    }
}
