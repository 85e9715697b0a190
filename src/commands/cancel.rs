//! `RATELIMIT.CANCEL key ticket [CLIENT id]`: a caller gave up the ACQUIRE it sent with `TICKET
//! ticket`. A grant it got is given back exactly, a wait still queued ends with the TIMEOUT's
//! reply, and an ACQUIRE with that ticket arriving later takes nothing. Replies the permits
//! given back.

use redis_module::{Context, RedisResult, RedisValue};

use super::client_option;
use super::doc::{Arg, ArgType, Doc, Keys, CLIENT, KEY, UPDATE};
use crate::args::Tokens;
use crate::blocking;
use crate::error::Error;
use crate::tickets;

pub const DOC: Doc = Doc {
    name: c"ratelimit.cancel",
    summary: c"Ends the ACQUIRE sent with a TICKET: gives its grant back exactly, or ends its wait.",
    complexity: c"O((E+K+1) log(N)), E being the expired entries pruned, K the entries at the grant's score and N the entries in the log; O(W) for the W waiters carrying the ticket.",
    arity: -3,
    flags: c"write",
    acl_categories: c"write slow",
    key: Keys::First(UPDATE),
    args: &[KEY, Arg::new(c"ticket", ArgType::String), CLIENT],
};

#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub ticket: &'a [u8],
    pub client: Option<&'a [u8]>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let (Some(key), Some(ticket)) = (tokens.next_arg(), tokens.next_arg()) else {
        return Err(Error::WrongArity);
    };
    let ticket = tickets::parse(ticket)?;
    let client = client_option(&mut tokens)?;
    Ok(Request {
        key,
        ticket,
        client,
    })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let Request {
        key,
        ticket,
        client,
    } = parse(args)?;
    let given_back = blocking::cancel(ctx, key, ticket, client)?;
    Ok(RedisValue::Integer(given_back))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_required_and_bounded() {
        let args: [&[u8]; 4] = [b"k", b"t-1", b"CLIENT", b"c"];
        assert_eq!(
            parse(&args),
            Ok(Request {
                key: b"k",
                ticket: b"t-1",
                client: Some(b"c")
            })
        );
        let args: [&[u8]; 1] = [b"k"];
        assert_eq!(parse(&args), Err(Error::WrongArity));
        let args: [&[u8]; 2] = [b"k", b""];
        assert_eq!(parse(&args), Err(Error::BadTicket { max: 64 }));
        let long = [b'x'; 65];
        let args: [&[u8]; 2] = [b"k", &long];
        assert_eq!(parse(&args), Err(Error::BadTicket { max: 64 }));
        let args: [&[u8]; 3] = [b"k", b"t", b"NX"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"NX")));
    }
}
