//! Wall-clock text forms: RFC 3339 UTC written as `YYYY-MM-DDTHH:MM:SS.mmmZ` (SPEC section 5).

use time::format_description::well_known::Rfc3339;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::OffsetDateTime;

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`: RFC 3339 in UTC with exactly three fraction digits.
const RFC3339_MILLIS: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// Formats Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ` (times past year 9999 as the epoch).
pub fn rfc3339_millis(unix_ms: u64) -> String {
    let t = OffsetDateTime::from_unix_timestamp_nanos(unix_ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    t.format(RFC3339_MILLIS)
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_string())
}

/// Parses any RFC 3339 timestamp to Unix milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
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
        assert_eq!(rfc3339_millis(u64::MAX), "1970-01-01T00:00:00.000Z");
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
}
