//! One file per command: parse the arguments into a request, call the store, shape the reply.

pub mod acquire;
pub mod available;
pub mod config;
pub mod debug;
pub mod delete;
pub mod doc;
pub mod expire;
pub mod persist;
pub mod release;
pub mod setrate;
pub mod tryacquire;

use redis_module::{RedisString, RedisValue};

use crate::args::{self, Tokens};
use crate::error::Error;
use crate::limiter::Outcome;

/// A command's arguments as bytes, without the command name; binary-safe.
fn byte_args(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().skip(1).map(RedisString::as_slice).collect()
}

/// The reply of TRYACQUIRE (and ACQUIRE): nil when acquired, else the wait in ms.
fn outcome_reply(outcome: Outcome) -> RedisValue {
    match outcome {
        Outcome::Acquired => RedisValue::Null,
        Outcome::Wait(ms) => RedisValue::Integer(ms),
    }
}

/// Parses the trailing `[CLIENT id]` that most commands take; anything else is a syntax error.
fn client_option<'a>(tokens: &mut Tokens<'a>) -> Result<Option<&'a [u8]>, Error> {
    let mut client = None;
    while let Some(token) = tokens.next_arg() {
        if args::is_keyword(token, "CLIENT") {
            args::set_once(&mut client, args::client_id(tokens.value_of_option()?)?)?;
        } else {
            return Err(Error::Syntax);
        }
    }
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_option_parses_once() {
        let ok: [&[u8]; 2] = [b"client", b"id-1"];
        assert_eq!(client_option(&mut Tokens::new(&ok)), Ok(Some(&b"id-1"[..])));
        let repeated: [&[u8]; 4] = [b"CLIENT", b"a", b"CLIENT", b"b"];
        assert_eq!(
            client_option(&mut Tokens::new(&repeated)),
            Err(Error::Syntax)
        );
        let missing: [&[u8]; 1] = [b"CLIENT"];
        assert_eq!(
            client_option(&mut Tokens::new(&missing)),
            Err(Error::Syntax)
        );
        let empty: [&[u8]; 2] = [b"CLIENT", b""];
        assert_eq!(
            client_option(&mut Tokens::new(&empty)),
            Err(Error::EmptyClient)
        );
        let unknown: [&[u8]; 1] = [b"FOO"];
        assert_eq!(
            client_option(&mut Tokens::new(&unknown)),
            Err(Error::Syntax)
        );
    }
}
