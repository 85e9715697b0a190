//! The commands' argument grammar over raw bytes (a client may send anything, so nothing here
//! assumes UTF-8): options, keywords, numbers in range, each failure as the commands' `Error`.

// No FFI here.
#![forbid(unsafe_code)]

use crate::error::Error;

// The number grammar and the bounds, pure, in the core crate; re-exported so that `args::` names
// every argument helper.
pub use ratelimit_core::number::{
    parse_double, parse_i64, parse_i64_lenient, MAX_DURATION_MS, MAX_PERMITS,
};

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

/// Option names are case-insensitive. Inlined: a parser tries each of its keywords in turn, and
/// most tries fail on the length alone, which the comparison checks first.
///
/// `keyword` is written in capitals (every caller's is a literal), so each of its letters
/// matches itself or its lower case and anything else matches only itself: what
/// `eq_ignore_ascii_case` answers, without folding both sides' case for every byte.
#[inline]
pub fn is_keyword(arg: &[u8], keyword: &str) -> bool {
    debug_assert!(!keyword.bytes().any(|k| k.is_ascii_lowercase()));
    arg.len() == keyword.len()
        && arg
            .iter()
            .zip(keyword.bytes())
            .all(|(&a, k)| a == k || (k.is_ascii_uppercase() && a == k.to_ascii_lowercase()))
}

/// Parses a decimal integer in `min..=max` the way Redis does (optional `-`, digits, no spaces,
/// no `+`, no leading zeros); any failure is an error that names the argument.
pub fn integer(arg: &[u8], name: &'static str, min: i64, max: i64) -> Result<i64, Error> {
    let error = || Error::Number {
        arg: name,
        min,
        max,
    };
    match parse_i64(arg) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(error()),
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
    fn keywords_match_as_eq_ignore_ascii_case() {
        // Every byte against every byte of a keyword of letters and punctuation.
        for keyword in ["PER_CLIENT", "A1-Z", "KEEPALIVE"] {
            for at in 0..keyword.len() {
                for byte in 0..=255u8 {
                    let mut arg = keyword.as_bytes().to_vec();
                    arg[at] = byte;
                    assert_eq!(
                        is_keyword(&arg, keyword),
                        arg.eq_ignore_ascii_case(keyword.as_bytes()),
                        "{arg:?} {keyword}"
                    );
                }
            }
        }
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
