//! Strings that commands reply with on every call (the names of a map's fields), made once at
//! load as replies of the server's own, then written to a client in one append each.
//!
//! `RM_ReplyWithStringBuffer` writes a bulk string as three appends to the client's buffer (its
//! length, its bytes, the CRLF), and on Redis 7.0 and 7.2 prepares the client for each; an
//! ALLOW names five fields. A reply `RM_Call` made is written by `RM_ReplyWithCallReply` as one
//! append of its bytes. So each name is made at load as the reply of an `ECHO` and kept until
//! unload. A name that could not be made (no detached context, `ECHO` renamed away) is written
//! as a plain bulk string: the same bytes.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use redis_module::{raw, Context};

use super::{detached, reply};

/// `N` names, each made at load or written plainly.
pub(crate) struct Names<const N: usize> {
    texts: [&'static CStr; N],
    made: [AtomicPtr<raw::RedisModuleCallReply>; N],
}

impl<const N: usize> Names<N> {
    pub(crate) const fn new(texts: [&'static CStr; N]) -> Self {
        Names {
            texts,
            made: [const { AtomicPtr::new(ptr::null_mut()) }; N],
        }
    }

    pub(crate) const fn len(&self) -> usize {
        N
    }

    /// The text of name `i`.
    pub(crate) fn text(&self, i: usize) -> Option<&'static CStr> {
        self.texts.get(i).copied()
    }

    /// Makes the names with the module's detached context, at load on the main thread; how
    /// many were made. A reply is kept only if its bytes are exactly the bulk string of its
    /// text (a command filter could have changed it).
    pub(crate) fn make(&self) -> usize {
        let module = detached::context();
        let (Some(call), Some(proto), Some(free)) = (
            api!(RedisModule_Call),
            api!(RedisModule_CallReplyProto),
            api!(RedisModule_FreeCallReply),
        ) else {
            return 0;
        };
        if module.is_null() {
            return 0;
        }
        let mut made = 0;
        for (text, slot) in self.texts.iter().zip(&self.made) {
            // SAFETY: RM_Call with format "cW" (one C-string argument; a command that may write
            // is refused, should another have been renamed ECHO) on the module's detached
            // context, from the main thread, which holds the server's lock. The context has no
            // automatic memory: the reply is ours until freed, or NULL.
            let reply = unsafe { call(module, c"ECHO".as_ptr(), c"cW".as_ptr(), text.as_ptr()) };
            if reply.is_null() {
                continue;
            }
            let mut len = 0;
            // SAFETY: a live reply; its bytes live as long as it does, and are read before it
            // is kept or freed.
            let exact = unsafe {
                let bytes = proto(reply, &mut len);
                !bytes.is_null()
                    && std::slice::from_raw_parts(bytes.cast::<u8>(), len)
                        == bulk_string(text.to_bytes()).as_slice()
            };
            let unkept = if exact {
                made += 1;
                slot.swap(reply, Relaxed)
            } else {
                reply
            };
            if !unkept.is_null() {
                // SAFETY: a reply of RM_Call that is not kept (or was kept by an earlier make,
                // and is swapped out), freed once.
                unsafe { free(unkept) };
            }
        }
        made
    }

    /// Writes name `i`, made or not.
    pub(crate) fn reply(&self, ctx: &Context, i: usize) {
        let made = self
            .made
            .get(i)
            .map_or(ptr::null_mut(), |slot| slot.load(Relaxed));
        if let (false, Some(with)) = (made.is_null(), api!(RedisModule_ReplyWithCallReply)) {
            // SAFETY: a command's context and a reply kept from load until `free` (at unload),
            // which the server copies into the client's buffer: a RESP2 bulk string, the same
            // bytes in RESP3. It refuses only a RESP3 reply to a RESP2 client, writing nothing.
            if unsafe { with(ctx.ctx, made) } == raw::REDISMODULE_OK as c_int {
                return;
            }
        }
        if let Some(text) = self.text(i) {
            reply::bulk(ctx, text.to_bytes());
        }
    }

    /// Frees the names made, at unload or when the load fails. A kept reply is a copy of its
    /// bytes and refers to no context, so this may come before or after the detached
    /// context's end.
    pub(crate) fn free(&self) {
        for slot in &self.made {
            let reply = slot.swap(ptr::null_mut(), Relaxed);
            if let (false, Some(free)) = (reply.is_null(), api!(RedisModule_FreeCallReply)) {
                // SAFETY: a reply `make` kept, freed once (swapped out).
                unsafe { free(reply) };
            }
        }
    }
}

/// The RESP bulk string of `bytes`: `$`, its length, CRLF, the bytes, CRLF.
fn bulk_string(bytes: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", bytes.len()).into_bytes();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bulk_string_is_its_length_then_its_bytes() {
        assert_eq!(bulk_string(b"retry_after"), b"$11\r\nretry_after\r\n");
        assert_eq!(bulk_string(b""), b"$0\r\n\r\n");
    }
}
