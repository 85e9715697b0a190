//! Argument parsing over raw bytes: a client may send anything, so nothing here assumes UTF-8.

// Pure logic: no FFI here.
#![forbid(unsafe_code)]

use crate::error::Error;

/// Largest accepted `interval`, `KEEPALIVE` and `EXPIRE` in milliseconds: 100 years. Far beyond
/// any real window, and small enough that `now ± interval` stays exact in a zset score (f64).
pub const MAX_DURATION_MS: i64 = 100 * 365 * 24 * 60 * 60 * 1000;

/// The bounds of the permit field in the log's encoding.
pub const MAX_PERMITS: i64 = u32::MAX as i64;

/// A cursor over a command's arguments (after the command name).
pub struct Tokens<'a> {
    args: &'a [&'a [u8]],
    pos: usize,
}

impl<'a> Tokens<'a> {
    pub fn new(args: &'a [&'a [u8]]) -> Self {
        Tokens { args, pos: 0 }
    }

    pub fn next_arg(&mut self) -> Option<&'a [u8]> {
        let arg = self.args.get(self.pos).copied();
        if arg.is_some() {
            self.pos += 1;
        }
        arg
    }

    /// The next argument, left in place.
    pub fn peek(&self) -> Option<&'a [u8]> {
        self.args.get(self.pos).copied()
    }

    /// The argument `option` takes; its absence is a syntax error naming the option.
    pub fn value_of_option(&mut self, option: &'static str) -> Result<&'a [u8], Error> {
        self.next_arg()
            .ok_or_else(|| Error::incomplete_option(option, "a value"))
    }

    /// The next argument if it is a number (used for optional positional numbers such as
    /// `permits`): anything that does not start like a number is left for option parsing.
    pub fn next_if_numeric(&mut self) -> Option<&'a [u8]> {
        match self.args.get(self.pos) {
            Some(arg) if looks_numeric(arg) => self.next_arg(),
            _ => None,
        }
    }
}

fn looks_numeric(arg: &[u8]) -> bool {
    match arg.first() {
        Some(b'-' | b'+') => arg.get(1).is_some_and(u8::is_ascii_digit),
        Some(b) => b.is_ascii_digit(),
        None => false,
    }
}

/// Option names are case-insensitive.
pub fn is_keyword(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// Parses a decimal integer in `min..=max` the way Redis does (optional `-`, digits, no spaces,
/// no `+`, no leading zeros); any failure is an error that names the argument.
pub fn integer(arg: &[u8], name: &'static str, min: i64, max: i64) -> Result<i64, Error> {
    let error = Error::Number {
        arg: name,
        min,
        max,
    };
    let n = parse_i64(arg).ok_or(error.clone())?;
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(error)
    }
}

/// A permit count: 1 ..= 4294967295, the range of the log's u32 field.
pub fn permits(arg: &[u8]) -> Result<u32, Error> {
    let n = integer(arg, "permits", 1, MAX_PERMITS)?;
    u32::try_from(n).map_err(|_| Error::Number {
        arg: "permits",
        min: 1,
        max: MAX_PERMITS,
    })
}

/// Strict decimal i64, as Redis's `string2ll`: rejects "", "+1", " 1", "01", "-0", "1.0".
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, bytes),
    };
    let (&first, _) = digits.split_first()?;
    if !digits.iter().all(u8::is_ascii_digit) || (first == b'0' && (digits.len() > 1 || negative)) {
        return None;
    }
    let mut value: i64 = 0;
    for &d in digits {
        let digit = i64::from(d - b'0');
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(digit)?
        } else {
            value.checked_add(digit)?
        };
    }
    Some(value)
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

/// A `CLIENT id` value: any bytes but the empty string.
pub fn client_id(arg: &[u8]) -> Result<&[u8], Error> {
    if arg.is_empty() {
        Err(Error::EmptyClient)
    } else {
        Ok(arg)
    }
}

/// Sets an option slot once; a repeated option is a syntax error naming it.
pub fn set_once<T>(slot: &mut Option<T>, value: T, option: &'static str) -> Result<(), Error> {
    if slot.is_some() {
        return Err(Error::repeated_option(option));
    }
    *slot = Some(value);
    Ok(())
}

/// Sets the slot of options that exclude each other (`OVERALL | PER_CLIENT`, `NX | XX`), which
/// keeps the keyword that set it: the same one again is repeated, another one conflicts.
pub fn set_one_of<T>(
    slot: &mut Option<(T, &'static str)>,
    value: T,
    option: &'static str,
) -> Result<(), Error> {
    match slot {
        None => {
            *slot = Some((value, option));
            Ok(())
        }
        Some((_, first)) if *first == option => Err(Error::repeated_option(option)),
        Some((_, first)) => Err(Error::conflicting_options(first, option)),
    }
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
            b"\xff",
            b"1\x00",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn range_errors_name_the_argument() {
        assert_eq!(
            integer(b"0", "rate", 1, 10).unwrap_err().to_string(),
            "ERR rate must be an integer between 1 and 10"
        );
        assert!(integer(b"abc", "interval", 1, 10).is_err());
        assert_eq!(permits(b"4294967295"), Ok(u32::MAX));
        assert!(permits(b"4294967296").is_err());
        assert!(permits(b"0").is_err());
    }

    #[test]
    fn optional_numbers_leave_options_alone() {
        let args: [&[u8]; 3] = [b"5", b"CLIENT", b"7"];
        let mut tokens = Tokens::new(&args);
        assert_eq!(tokens.next_if_numeric(), Some(&b"5"[..]));
        assert_eq!(tokens.next_if_numeric(), None);
        assert_eq!(tokens.next_arg(), Some(&b"CLIENT"[..]));
        let negative: [&[u8]; 1] = [b"-3"];
        assert_eq!(Tokens::new(&negative).next_if_numeric(), Some(&b"-3"[..]));
    }

    #[test]
    fn keywords_are_case_insensitive() {
        assert!(is_keyword(b"keepstate", "KEEPSTATE"));
        assert!(is_keyword(b"Per_Client", "PER_CLIENT"));
        assert!(!is_keyword(b"KEEP", "KEEPSTATE"));
    }

    #[test]
    fn options_may_be_given_once() {
        let mut slot = None;
        assert!(set_once(&mut slot, 1, "PERMITS").is_ok());
        assert_eq!(
            set_once(&mut slot, 2, "PERMITS"),
            Err(Error::repeated_option("PERMITS"))
        );
        assert_eq!(slot, Some(1));
    }

    #[test]
    fn exclusive_options_conflict_and_repeat() {
        let mut slot = None;
        assert!(set_one_of(&mut slot, 1, "NX").is_ok());
        assert_eq!(
            set_one_of(&mut slot, 2, "XX"),
            Err(Error::conflicting_options("NX", "XX"))
        );
        assert_eq!(
            set_one_of(&mut slot, 1, "NX"),
            Err(Error::repeated_option("NX"))
        );
        assert_eq!(slot, Some((1, "NX")));
    }

    #[test]
    fn a_missing_value_names_its_option() {
        let args: [&[u8]; 0] = [];
        assert_eq!(
            Tokens::new(&args).value_of_option("TIMEOUT"),
            Err(Error::incomplete_option("TIMEOUT", "a value"))
        );
    }
}
