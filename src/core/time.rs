//! Wall-clock text forms: RFC 3339 UTC written as `YYYY-MM-DDTHH:MM:SS.mmmZ` (SPEC section 5).

use time::format_description::well_known::Rfc3339;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::OffsetDateTime;

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`: RFC 3339 in UTC with exactly three fraction digits.
const RFC3339_MILLIS: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// The text of every time past the last one a four-digit year can write.
const LAST_PRINTABLE: &str = "9999-12-31T23:59:59.999Z";

/// Unix ms of [`LAST_PRINTABLE`]: the last time with a text of its own.
pub const LAST_PRINTABLE_MS: u64 = 253_402_300_799_999;

/// Formats Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ`. A time past year 9999 (a damaged row,
/// a clock set far ahead) is shown as the last printable millisecond, never as the epoch: a retry
/// "due in 1970" would read as due now.
pub fn rfc3339_millis(unix_ms: u64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(unix_ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(RFC3339_MILLIS).ok())
        .filter(|text| text.len() == LAST_PRINTABLE.len())
        .unwrap_or_else(|| LAST_PRINTABLE.to_string())
}

/// Parses any RFC 3339 timestamp to Unix milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// Whether `text` is an RFC 3339 timestamp: exactly the texts [`parse_rfc3339_ms`] accepts. The
/// writer's form `YYYY-MM-DDTHH:MM:SS.mmmZ` with a real date and a time before second 60 is
/// recognised byte by byte (no parse per entry); anything else (other offsets and fractions,
/// leap seconds, malformed text) goes to the parser.
pub fn is_rfc3339(text: &str) -> bool {
    plain_utc_millis(text.as_bytes()) || parse_rfc3339_ms(text).is_some()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` with month 1-12, a day of that month, hour < 24, minute and
/// second < 60.
fn plain_utc_millis(b: &[u8]) -> bool {
    let [y0, y1, y2, y3, b'-', m0, m1, b'-', d0, d1, b'T', h0, h1, b':', n0, n1, b':', s0, s1, b'.', f0, f1, f2, b'Z'] =
        *b
    else {
        return false;
    };
    let digits = [
        y0, y1, y2, y3, m0, m1, d0, d1, h0, h1, n0, n1, s0, s1, f0, f1, f2,
    ];
    if !digits.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let two = |a: u8, b: u8| u32::from(a - b'0') * 10 + u32::from(b - b'0');
    let year = two(y0, y1) * 100 + two(y2, y3);
    let (month, day) = (two(m0, m1), two(d0, d1));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day) && two(h0, h1) < 24 && two(n0, n1) < 60 && two(s0, s1) < 60
}

/// Now, formatted.
pub fn now_rfc3339() -> String {
    rfc3339_millis(crate::core::hlc::unix_ms_now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses() {
        assert_eq!(rfc3339_millis(1767614460000), "2026-01-05T12:01:00.000Z");
        assert_eq!(rfc3339_millis(7), "1970-01-01T00:00:00.007Z");
        assert_eq!(
            rfc3339_millis(253_402_300_799_999),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(rfc3339_millis(u64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(
            rfc3339_millis(253_402_300_799_999),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339_millis(253_402_300_800_000),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            parse_rfc3339_ms("2026-01-05T12:01:00.000Z"),
            Some(1767614460000)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-01-05T13:01:00+01:00"),
            Some(1767614460000)
        );
        assert_eq!(parse_rfc3339_ms("yesterday"), None);
    }

    /// Every day of leap and common years, with every boundary of the time fields: the byte
    /// check accepts exactly what the parser accepts.
    #[test]
    fn the_byte_check_agrees_with_the_parser_on_every_date() {
        for year in [0, 1, 1900, 1970, 2000, 2023, 2024, 2100, 9999] {
            for month in 0..=13 {
                for day in 0..=32 {
                    let t = format!("{year:04}-{month:02}-{day:02}T00:00:00.000Z");
                    assert_eq!(is_rfc3339(&t), parse_rfc3339_ms(&t).is_some(), "{t}");
                    if plain_utc_millis(t.as_bytes()) {
                        assert!(parse_rfc3339_ms(&t).is_some(), "{t}");
                    }
                }
            }
        }
        for (h, m, s) in [
            (23, 59, 59),
            (24, 0, 0),
            (0, 60, 0),
            (0, 0, 60),
            (23, 59, 60),
        ] {
            let t = format!("2016-12-31T{h:02}:{m:02}:{s:02}.000Z");
            assert_eq!(is_rfc3339(&t), parse_rfc3339_ms(&t).is_some(), "{t}");
        }
    }

    proptest::proptest! {
        /// Texts in the writer's shape with fields in and out of range, and mutations of them:
        /// the byte check only accepts what the parser accepts, and `is_rfc3339` is the parser's
        /// answer.
        #[test]
        fn the_byte_check_agrees_with_the_parser(
            (y, mo, d) in (0u32..=9999, 0u32..=13, 0u32..=32),
            (h, mi, s, ms) in (0u32..=25, 0u32..=61, 0u32..=61, 0u32..=999),
            edit in proptest::option::of((0usize..24, proptest::prelude::any::<u8>())),
        ) {
            let mut t = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z").into_bytes();
            if let Some((at, byte)) = edit {
                t[at] = byte;
            }
            let Ok(t) = String::from_utf8(t) else { return Ok(()) };
            let parsed = parse_rfc3339_ms(&t).is_some();
            proptest::prop_assert!(!plain_utc_millis(t.as_bytes()) || parsed, "{}", t);
            proptest::prop_assert_eq!(is_rfc3339(&t), parsed, "{}", t);
        }
    }
}
