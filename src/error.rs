//! Every way a command can fail, as a value. Handlers return these; nothing panics.

// Pure logic: no FFI here.
#![forbid(unsafe_code)]

use std::fmt;

use redis_module::RedisError;

/// A command failure. `Display` gives the exact error line the client sees (first word = error code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Wrong number of arguments; Redis formats the standard message with the command name.
    WrongArity,
    /// Unknown, repeated, conflicting or incomplete option: Redis's `syntax error`, saying which.
    Syntax(Syntax),
    /// The limiter's hash (the command's own key) holds another type: Redis's own text.
    WrongType,
    /// A key the limiter derives from its name (`{name}:value`, `{name}:permits`, a client's)
    /// holds another type: Redis's text, naming the key, which the caller never typed.
    WrongTypeDerived { key: Vec<u8> },
    /// The hash is missing or lacks `rate`, `interval` or `type`: Redisson's message, which
    /// clients match on, kept as the start of the line, then the limiter's name.
    NotInitialized { name: Vec<u8> },
    /// More permits requested than the limiter's rate (Redisson's message, kept verbatim).
    PermitsExceedRate,
    /// A numeric argument that is malformed or outside its range.
    Number {
        arg: &'static str,
        min: i64,
        max: i64,
    },
    /// A non-zero KEEPALIVE shorter than the interval.
    KeepAliveBelowInterval,
    /// A PER_CLIENT limiter was used without `CLIENT id`.
    ClientRequired,
    /// `CLIENT` with an empty id.
    EmptyClient,
    /// A `TICKET` empty or longer than the table keeps.
    BadTicket {
        /// The longest ticket taken, in bytes.
        max: usize,
    },
    /// EXPIRE with NX and another condition, or GT with LT (Redis's own messages).
    IncompatibleExpireOptions(&'static str),
    /// Data written by someone else that this module cannot read. Names the key and the problem.
    Corrupt { key: Vec<u8>, problem: String },
    /// A string key that holds no ONEKEY limiter (a number, text, a GCRA key): the module
    /// neither reads nor overwrites it.
    NotALimiter { key: Vec<u8> },
    /// SETRATE asked for the other form of an existing limiter (ONEKEY for a three-key one, or
    /// the reverse).
    FormChange { key: Vec<u8>, one_key: bool },
    /// A ONEKEY configuration whose log could hold more entries than a call may read.
    OneKeyTooFine { max: i64 },
    /// An expiry that does not fit the clock (Redis's own message).
    InvalidExpireTime,
    /// RATELIMIT.DEBUG misuse.
    Debug(&'static str),
    /// The caller's ACL does not allow a key the limiter derives from its name.
    NoPermission { key: Vec<u8> },
    /// ALLOWALL listed a key twice.
    KeyListedTwice { key: Vec<u8> },
    /// ALLOWALL listed two names whose derived keys are the same (`a` and `{a}`).
    SharedState { first: Vec<u8>, second: Vec<u8> },
    /// An error of one limiter of several (ALLOWALL), naming it.
    OfLimiter { key: Vec<u8>, error: Box<Error> },
    /// In cluster mode, a name whose derived keys hash to another slot (such as `a{b`).
    CrossSlot { name: Vec<u8> },
    /// An error whose text is fixed (the GCRA commands' texts, some of them Redis's own).
    Message(&'static str),
    /// In cluster mode, some of the limiter's keys are missing here while its slot is being
    /// migrated (Redis's own reply to a multi-key command in that state).
    SlotMigrating,
}

/// What is wrong with a command's options. Each names the word the parser stopped at: the
/// client's own word when it is none of the command's options, else the option's keyword.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Syntax {
    /// A word that is none of the command's options here (an extra argument included).
    Unknown(Vec<u8>),
    /// An option given twice.
    Repeated(&'static str),
    /// Two options that exclude each other, in the order given.
    Conflict(&'static str, &'static str),
    /// An option without its value: the option and what it needs.
    Incomplete {
        option: &'static str,
        needs: &'static str,
    },
}

impl Error {
    pub fn unknown_option(word: &[u8]) -> Self {
        Error::Syntax(Syntax::Unknown(word.to_vec()))
    }

    pub fn repeated_option(option: &'static str) -> Self {
        Error::Syntax(Syntax::Repeated(option))
    }

    pub fn conflicting_options(first: &'static str, second: &'static str) -> Self {
        Error::Syntax(Syntax::Conflict(first, second))
    }

    pub fn incomplete_option(option: &'static str, needs: &'static str) -> Self {
        Error::Syntax(Syntax::Incomplete { option, needs })
    }

    pub fn not_initialized(name: &[u8]) -> Self {
        Error::NotInitialized {
            name: name.to_vec(),
        }
    }

    /// The error as one of several limiters' errors: it names the limiter unless it already
    /// names a key of its own.
    pub fn of_limiter(self, key: &[u8]) -> Self {
        match self {
            Error::Corrupt { .. }
            | Error::NotALimiter { .. }
            | Error::NotInitialized { .. }
            | Error::WrongTypeDerived { .. }
            | Error::NoPermission { .. }
            | Error::CrossSlot { .. }
            | Error::OfLimiter { .. } => self,
            error => Error::OfLimiter {
                key: key.to_vec(),
                error: Box::new(error),
            },
        }
    }

    pub fn corrupt(key: &[u8], problem: impl Into<String>) -> Self {
        Error::Corrupt {
            key: key.to_vec(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::WrongArity => f.write_str("ERR wrong number of arguments"),
            Error::Syntax(syntax) => write!(f, "ERR syntax error, {syntax}"),
            Error::WrongType => f.write_str(WRONGTYPE),
            Error::WrongTypeDerived { key } => write!(f, "{WRONGTYPE} (key '{}')", Printable(key)),
            Error::NotInitialized { name } => write!(
                f,
                "ERR RateLimiter is not initialized (limiter '{}')",
                Printable(name)
            ),
            Error::PermitsExceedRate => {
                f.write_str("ERR Requested permits amount cannot exceed defined rate")
            }
            Error::Number { arg, min, max } => {
                write!(f, "ERR {arg} must be an integer between {min} and {max}")
            }
            Error::KeepAliveBelowInterval => {
                f.write_str("ERR KEEPALIVE must be 0 or at least the interval")
            }
            Error::ClientRequired => {
                f.write_str("ERR the limiter is PER_CLIENT: CLIENT id is required")
            }
            Error::EmptyClient => f.write_str("ERR CLIENT id must not be empty"),
            Error::BadTicket { max } => write!(f, "ERR TICKET must be 1 to {max} bytes"),
            Error::IncompatibleExpireOptions(msg) => write!(f, "ERR {msg}"),
            Error::Corrupt { key, problem } => {
                write!(
                    f,
                    "ERR corrupt rate limiter key '{}': {problem}",
                    Printable(key)
                )
            }
            Error::NotALimiter { key } => write!(
                f,
                "WRONGTYPE key '{}' holds a string that is not a ONEKEY rate limiter",
                Printable(key)
            ),
            Error::FormChange { key, one_key } => {
                let (form, option) = if *one_key {
                    ("a ONEKEY limiter", "with ONEKEY")
                } else {
                    ("a three-key (Redisson) limiter", "without ONEKEY")
                };
                write!(
                    f,
                    "ERR limiter '{}' is {form}: reconfigure it {option}, or RATELIMIT.DELETE it \
                     first to change its form",
                    Printable(key)
                )
            }
            Error::OneKeyTooFine { max } => write!(
                f,
                "ERR a ONEKEY limiter logs at most {max} entries: with a rate above {max}, \
                 PRECISION must be at least interval/{max}"
            ),
            Error::InvalidExpireTime => {
                f.write_str("ERR invalid expire time in 'ratelimit.expire' command")
            }
            Error::Debug(msg) | Error::Message(msg) => write!(f, "ERR {msg}"),
            Error::NoPermission { key } => write!(
                f,
                "NOPERM this user has no permissions to access the limiter key '{}'",
                Printable(key)
            ),
            Error::SlotMigrating => {
                f.write_str("TRYAGAIN Multiple keys request during rehashing of slot")
            }
            Error::KeyListedTwice { key } => {
                write!(f, "ERR key '{}' is listed more than once", Printable(key))
            }
            Error::SharedState { first, second } => write!(
                f,
                "ERR limiters '{}' and '{}' share the same state keys",
                Printable(first),
                Printable(second)
            ),
            Error::OfLimiter { key, error } => {
                let shown = match error.as_ref() {
                    Error::WrongArity => "ERR wrong number of arguments".to_string(),
                    other => other.to_string(),
                };
                write!(f, "{shown} (limiter '{}')", Printable(key))
            }
            Error::CrossSlot { name } => {
                // Suggest the name with its braces removed, as a complete tag: always valid.
                let core: Vec<u8> = name
                    .iter()
                    .copied()
                    .filter(|b| !matches!(b, b'{' | b'}'))
                    .collect();
                let core: &[u8] = if core.is_empty() { b"limiter" } else { &core };
                write!(
                    f,
                    "CROSSSLOT the keys of limiter '{}' hash to different slots; use a name \
                     with a complete, non-empty hash tag, such as '{{{}}}'",
                    Printable(name),
                    Printable(core)
                )
            }
        }
    }
}

/// Redis's own text for a key of the wrong type.
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl fmt::Display for Syntax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Syntax::Unknown(word) => write!(f, "unknown option '{}'", Printable(word)),
            Syntax::Repeated(option) => write!(f, "{option} specified multiple times"),
            Syntax::Conflict(first, second) => write!(
                f,
                "{first} and {second} options at the same time are not compatible"
            ),
            Syntax::Incomplete { option, needs } => write!(f, "{option} needs {needs}"),
        }
    }
}

impl From<Error> for RedisError {
    fn from(e: Error) -> Self {
        match e {
            // The crate turns these two into the server's standard texts.
            Error::WrongArity => RedisError::WrongArity,
            Error::WrongType => RedisError::WrongType,
            other => RedisError::String(other.to_string()),
        }
    }
}

/// How many bytes of a name an error line shows: a huge key name or client id never makes a
/// huge reply.
pub const SHOWN_BYTES: usize = 256;

/// Shows a binary key name in an error line: printable ASCII as is, anything else as `\xNN`,
/// so an error can never carry CR, LF or NUL into the protocol; at most [`SHOWN_BYTES`] of it,
/// then a marker saying how much was cut.
pub struct Printable<'a>(pub &'a [u8]);

impl fmt::Display for Printable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (shown, cut) = self.0.split_at(self.0.len().min(SHOWN_BYTES));
        for &b in shown {
            if (0x20..0x7f).contains(&b) && b != b'\\' && b != b'\'' {
                write!(f, "{}", b as char)?;
            } else {
                write!(f, "\\x{b:02x}")?;
            }
        }
        if !cut.is_empty() {
            write!(f, "...({} more bytes)", cut.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_control_and_binary_bytes() {
        let shown = Printable(b"a\r\n\x00\xff'b").to_string();
        assert_eq!(shown, "a\\x0d\\x0a\\x00\\xff\\x27b");
    }

    #[test]
    fn printable_cuts_long_names() {
        let shown = Printable(&[b'a'; 1000]).to_string();
        assert_eq!(shown, format!("{}...(744 more bytes)", "a".repeat(256)));
        let shown = Printable(&[0u8; 300]).to_string();
        assert_eq!(shown.len(), 256 * 4 + "...(44 more bytes)".len());
        assert_eq!(Printable(&[b'x'; 256]).to_string(), "x".repeat(256));
    }

    #[test]
    fn errors_of_one_limiter_of_several_name_it() {
        assert_eq!(
            Error::not_initialized(b"day")
                .of_limiter(b"day")
                .to_string(),
            "ERR RateLimiter is not initialized (limiter 'day')"
        );
        let derived = Error::WrongTypeDerived {
            key: b"{day}:permits".to_vec(),
        };
        assert_eq!(derived.clone().of_limiter(b"day"), derived);
        assert_eq!(
            Error::WrongType.of_limiter(b"day").to_string(),
            "WRONGTYPE Operation against a key holding the wrong kind of value (limiter 'day')"
        );
        let corrupt = Error::corrupt(b"{day}:value", "value is not an integer");
        assert_eq!(corrupt.clone().of_limiter(b"day"), corrupt);
    }

    #[test]
    fn syntax_errors_keep_redis_prefix_and_name_the_word() {
        for (error, text) in [
            (
                Error::unknown_option(b"abc"),
                "ERR syntax error, unknown option 'abc'",
            ),
            (
                Error::unknown_option(b"a\r\nb"),
                "ERR syntax error, unknown option 'a\\x0d\\x0ab'",
            ),
            (
                Error::repeated_option("CLIENT"),
                "ERR syntax error, CLIENT specified multiple times",
            ),
            (
                Error::conflicting_options("NX", "XX"),
                "ERR syntax error, NX and XX options at the same time are not compatible",
            ),
            (
                Error::incomplete_option("CLIENT", "a value"),
                "ERR syntax error, CLIENT needs a value",
            ),
        ] {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn wrong_types_name_a_derived_key_and_keep_redis_text_for_the_hash() {
        assert_eq!(
            Error::WrongType.to_string(),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
        assert_eq!(
            Error::WrongTypeDerived {
                key: b"{k}:permits".to_vec()
            }
            .to_string(),
            "WRONGTYPE Operation against a key holding the wrong kind of value (key '{k}:permits')"
        );
        assert_eq!(
            Error::not_initialized(b"login").to_string(),
            "ERR RateLimiter is not initialized (limiter 'login')"
        );
    }

    #[test]
    fn corrupt_error_names_the_key() {
        let e = Error::corrupt(b"{x}:value", "value is not an integer");
        assert_eq!(
            e.to_string(),
            "ERR corrupt rate limiter key '{x}:value': value is not an integer"
        );
    }
}
