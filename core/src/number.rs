//! Numbers as clients spell them (Redis's strict decimal, redis-cell's lenient one, `strtod`'s
//! doubles) and the bounds of a limiter's numbers: what every layer agrees a number is.

/// Largest accepted `interval`, `KEEPALIVE` and `EXPIRE` in milliseconds: 100 years. Far beyond
/// any real window, and small enough that `now ± interval` stays exact in a zset score (f64).
pub const MAX_DURATION_MS: i64 = 100 * 365 * 24 * 60 * 60 * 1000;

/// The bounds of the permit field in the log's encoding.
pub const MAX_PERMITS: i64 = u32::MAX as i64;

/// Strict decimal i64, as Redis's `string2ll`: rejects "", "+1", " 1", "01", "-0", "1.0".
///
/// One pass over the digits: every command parses a few numbers. Nineteen digits always fit a
/// `u64` (whose range ends at 18446744073709551615), so only the final conversion can
/// overflow; more digits, with no leading zero, are beyond any `i64`.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, bytes),
    };
    match digits {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] if digits.len() <= 19 => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        magnitude = magnitude * 10 + u64::from(digit);
    }
    if negative {
        // Down to i64::MIN, whose magnitude is one more than i64::MAX.
        (magnitude <= i64::MIN.unsigned_abs()).then(|| 0i64.wrapping_sub_unsigned(magnitude))
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// A decimal i64 as Rust's `str::parse` reads it (an optional `+` or `-`, then digits, leading
/// zeros allowed): how redis-cell reads `CL.THROTTLE`'s numbers, so its callers' arguments mean
/// the same here.
pub fn parse_i64_lenient(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse::<i64>().ok()
}

/// A double as Redis reads one (`string2d`: `strtod` over the whole argument): no leading
/// space, `.5`, `5.`, `1e3`, hexadecimal `0x10` and `0x1p4`, `inf`; not `nan`, not a value that
/// overflows to infinity or underflows to zero.
pub fn parse_double(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_ascii_whitespace() || c == '\x0b') {
        return None;
    }
    let (negative, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let lower = body.to_ascii_lowercase();
    let magnitude = if lower == "inf" || lower == "infinity" {
        f64::INFINITY
    } else if let Some(hex) = lower.strip_prefix("0x") {
        parse_hex_float(hex)?
    } else {
        // Rust's grammar is strtod's for decimals, but it also takes "nan" and "inf" words
        // (handled above or refused here).
        if !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            return None;
        }
        let value: f64 = body.parse().ok()?;
        let mantissa = body.split(['e', 'E']).next().unwrap_or_default();
        let nonzero_digits = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
        // strtod's ERANGE: overflow to infinity, or underflow of a nonzero number to zero.
        if value.is_infinite() || (value == 0.0 && nonzero_digits) {
            return None;
        }
        value
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// The part of a hexadecimal float after `0x`: hex digits with an optional point, then an
/// optional binary exponent `p[+-]digits`.
fn parse_hex_float(hex: &str) -> Option<f64> {
    let (mantissa, exponent) = match hex.split_once('p') {
        Some((m, e)) => (m, Some(e)),
        None => (hex, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in whole.chars() {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in fraction.chars() {
        value += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    if let Some(exponent) = exponent {
        let power: i32 = exponent
            .strip_prefix('+')
            .unwrap_or(exponent)
            .parse()
            .ok()?;
        value *= 2f64.powi(power);
    }
    (value.is_finite() && !(value == 0.0 && mantissa.bytes().any(|b| b != b'0' && b != b'.')))
        .then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_strict_decimal_integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-42"), Some(-42));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        // Every width, at both ends of each sign.
        let mut n: i64 = 1;
        loop {
            for m in [n, n - 1, n + 1, -n, 1 - n, -n - 1] {
                assert_eq!(parse_i64(m.to_string().as_bytes()), Some(m), "{m}");
            }
            match n.checked_mul(10) {
                Some(next) if next < i64::MAX - 1 => n = next,
                _ => break,
            }
        }
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"1.0",
            b"1e3",
            b"0x10",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"18446744073709551616",
            b"99999999999999999999",
            b"10000000000000000000",
            b"--1",
            b"1-",
            b"0-",
            b"\xff",
            b"1\x00",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }
}
