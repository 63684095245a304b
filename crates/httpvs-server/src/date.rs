//! The `date` of h2 and h3 answers (hyper writes its own on HTTP/1.1): the IMF-fixdate of the
//! current second, kept per worker thread by a task that wakes at each second's turn, so answers
//! read it with no clock read and no allocation.

use bytes::Bytes;
use http::HeaderValue;
use std::cell::RefCell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bytes of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

/// One second's date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Seconds since the Unix epoch.
    pub second: u64,
    /// Its IMF-fixdate (RFC 9110 §5.6.7).
    pub text: [u8; DATE_LEN],
}

struct Cache {
    stamp: Stamp,
    value: HeaderValue,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::at(since_epoch().as_secs()));
}

impl Cache {
    fn at(second: u64) -> Cache {
        let stamp = Stamp {
            second,
            text: imf_fixdate(second),
        };
        // Formatted ASCII is always a valid value; the fallback only keeps this panic-free.
        let value = HeaderValue::from_maybe_shared(Bytes::copy_from_slice(&stamp.text))
            .unwrap_or(HeaderValue::from_static(""));
        Cache { stamp, value }
    }
}

fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Keeps this thread's date current, formatting it at each second's turn: one task per worker
/// runtime (a tokio timer wakes within a millisecond of the turn).
pub async fn keep_current() {
    loop {
        let now = since_epoch();
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if cache.stamp.second != now.as_secs() {
                *cache = Cache::at(now.as_secs());
            }
        });
        let to_turn = Duration::from_nanos(1_000_000_000 - u64::from(now.subsec_nanos()));
        tokio::time::sleep(to_turn).await;
    }
}

/// The current second's date.
pub fn now() -> Stamp {
    CACHE.with(|cache| cache.borrow().stamp)
}

/// The current second's date as a header value (a reference count, no copy).
pub fn header_value() -> HeaderValue {
    CACHE.with(|cache| cache.borrow().value.clone())
}

/// Formats `second` (since the Unix epoch) as an IMF-fixdate.
fn imf_fixdate(second: u64) -> [u8; DATE_LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = second / 86_400;
    let in_day = second % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    two_digits(&mut out[5..7], day);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    two_digits(&mut out[12..14], year / 100 % 100);
    two_digits(&mut out[14..16], year % 100);
    two_digits(&mut out[17..19], in_day / 3600);
    two_digits(&mut out[20..22], in_day / 60 % 60);
    two_digits(&mut out[23..25], in_day % 60);
    out
}

fn two_digits(out: &mut [u8], n: u64) {
    out[0] = b'0' + (n / 10 % 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// (year, month 1..=12, day 1..=31) of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_match_rfc_9110_examples_and_leap_days() {
        for (second, text) in [
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
            (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
            (1_795_600_000, "Wed, 25 Nov 2026 09:46:40 GMT"),
            (4_102_444_799, "Thu, 31 Dec 2099 23:59:59 GMT"),
        ] {
            assert_eq!(std::str::from_utf8(&imf_fixdate(second)).unwrap(), text);
        }
    }

    #[test]
    fn the_cached_value_is_the_current_second() {
        let value = header_value();
        let stamp = now();
        assert!(stamp.second > 1_700_000_000);
        assert_eq!(value.as_bytes(), stamp.text);
        assert!(since_epoch().as_secs() - stamp.second <= 1);
    }

    #[tokio::test]
    async fn the_keeper_turns_the_date_with_the_clock() {
        tokio::spawn(keep_current());
        let first = now();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let later = now();
        assert!(later.second > first.second, "{first:?} then {later:?}");
        assert_eq!(later.text, imf_fixdate(later.second));
        assert_eq!(header_value().as_bytes(), later.text);
    }
}
