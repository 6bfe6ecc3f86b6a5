//! Wall-clock times as the store and the task records write them: RFC 3339 in UTC with
//! milliseconds (`2026-11-22T12:04:05.123Z`), which sort as text in time order. Formatted by hand
//! (days-to-civil from Howard Hinnant's algorithms) rather than pulling in a date crate for one
//! function.
//!
//! And the boot clock ([`boot_clock`]): milliseconds since boot, which a wall-clock step (NTP, a
//! resumed VM, someone setting the date) does not move, for ages that must survive such a step.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `t` as RFC 3339 UTC with milliseconds; times before 1970 print as the epoch.
pub fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = since.as_secs();
    let millis = since.subsec_millis();
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Now, as RFC 3339.
pub fn now() -> String {
    rfc3339(SystemTime::now())
}

/// Seconds since the Unix epoch, now.
pub fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// This boot's id and the milliseconds since it began (`CLOCK_BOOTTIME`, read from
/// `/proc/uptime` so every process of the machine reads the same clock); `None` without `/proc`.
pub(crate) fn boot_clock() -> Option<(String, u64)> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let ms = uptime_ms(uptime.split_whitespace().next()?)?;
    Some((id.trim().to_owned(), ms))
}

/// `/proc/uptime`'s first field (seconds, with a fraction) in milliseconds.
fn uptime_ms(field: &str) -> Option<u64> {
    let (secs, frac) = field.split_once('.').unwrap_or((field, ""));
    let secs: u64 = secs.parse().ok()?;
    let frac: String = frac.chars().chain(std::iter::repeat('0')).take(3).collect();
    let millis: u64 = frac.parse().ok()?;
    secs.checked_mul(1000)?.checked_add(millis)
}

/// (year, month, day) of the day `z` days after 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        let at = |s: u64, ms: u64| {
            rfc3339(UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.007Z");
        assert_eq!(at(1_795_349_045, 123), "2026-11-22T12:04:05.123Z");
        assert_eq!(at(4_102_444_799, 999), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn the_boot_clock_reads_proc_uptime() {
        assert_eq!(uptime_ms("12345.67"), Some(12_345_670));
        assert_eq!(uptime_ms("0.05"), Some(50));
        assert_eq!(uptime_ms("7"), Some(7000));
        assert_eq!(uptime_ms("x.1"), None);
        let (id, first) = boot_clock().expect("/proc is mounted");
        assert_eq!(id.len(), 36, "{id}");
        let (again, second) = boot_clock().unwrap();
        assert_eq!(again, id);
        assert!(second >= first);
    }

    #[test]
    fn sorts_as_text_in_time_order() {
        let mut last = String::new();
        for s in (0..4_000_000_000_u64).step_by(7_777_777) {
            let t = rfc3339(UNIX_EPOCH + Duration::from_secs(s));
            assert!(t > last, "{t} <= {last}");
            last = t;
        }
    }
}
