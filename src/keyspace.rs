//! The keyspace contract shared with Redisson's `RRateLimiter`: key names, hash fields, and the
//! byte encoding of permit-log members. Everything that must stay byte-compatible lives here.

use std::ffi::CStr;

use byteorder::{ByteOrder, LittleEndian};

/// Hash field names, exactly as Redisson writes them.
pub const FIELD_RATE: &CStr = c"rate";
pub const FIELD_INTERVAL: &CStr = c"interval";
pub const FIELD_TYPE: &CStr = c"type";
pub const FIELD_KEEP_ALIVE: &CStr = c"keepAliveTime";

/// `type` field values. Only the exact string `1` means PER_CLIENT.
pub const TYPE_OVERALL: &[u8] = b"0";
pub const TYPE_PER_CLIENT: &[u8] = b"1";

/// Length of the random id this module writes (Redisson writes the same).
pub const ID_LEN: usize = 16;
/// Size of a member this module writes: length byte, id, u32 permits.
pub const MEMBER_LEN: usize = 1 + ID_LEN + 4;

/// The names of the value string and permits zset of one limiter state: the OVERALL state or
/// one client's state of a PER_CLIENT limiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateKeys {
    pub value: Vec<u8>,
    pub permits: Vec<u8>,
}

impl StateKeys {
    /// The OVERALL state of limiter `name`: `{name}:value`, `{name}:permits`.
    pub fn overall(name: &[u8]) -> Self {
        StateKeys {
            value: suffixed(name, b"value"),
            permits: suffixed(name, b"permits"),
        }
    }

    /// One client's state: `{name}:value:<client>`, `{name}:permits:<client>`. The value and
    /// permits names already contain `{`, so the client id is appended unwrapped.
    pub fn client(name: &[u8], client: &[u8]) -> Self {
        let overall = Self::overall(name);
        StateKeys {
            value: suffixed(&overall.value, client),
            permits: suffixed(&overall.permits, client),
        }
    }
}

/// Redisson's `suffixName`: wrap the name in a hash tag unless it already contains `{`.
fn suffixed(name: &[u8], suffix: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + suffix.len() + 3);
    if name.contains(&b'{') {
        out.extend_from_slice(name);
    } else {
        out.push(b'{');
        out.extend_from_slice(name);
        out.push(b'}');
    }
    out.push(b':');
    out.extend_from_slice(suffix);
    out
}

/// The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag (the part between the
/// first `{` and the next `}`, if non-empty) or of the whole key, modulo 16384.
pub fn hash_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % 16384
}

/// Whether every key derived from limiter `name` (value, permits, and any client's) hashes to
/// `name`'s own cluster slot. Checking the OVERALL keys is enough: when they share the slot,
/// either `name` has a complete hash tag that every derived key repeats, or it has no brace and
/// every derived key is tagged `{name}`.
pub fn derived_keys_share_slot(name: &[u8]) -> bool {
    let slot = hash_slot(name);
    let keys = StateKeys::overall(name);
    hash_slot(&keys.value) == slot && hash_slot(&keys.permits) == slot
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Encodes a member: `[id length][id][permits as u32 little-endian]`.
pub fn encode_member(id: &[u8; ID_LEN], permits: u32) -> [u8; MEMBER_LEN] {
    let mut out = [0u8; MEMBER_LEN];
    out[0] = ID_LEN as u8;
    out[1..=ID_LEN].copy_from_slice(id);
    LittleEndian::write_u32(&mut out[1 + ID_LEN..], permits);
    out
}

/// Re-encodes a member with another permit count, keeping its id (of any length up to 255,
/// since it came from a length byte). Used when a release splits an entry.
pub fn reencode_member(id: &[u8], permits: u32) -> Option<Vec<u8>> {
    let len = u8::try_from(id.len()).ok()?;
    let mut out = Vec::with_capacity(id.len() + 5);
    out.push(len);
    out.extend_from_slice(id);
    let mut tail = [0u8; 4];
    LittleEndian::write_u32(&mut tail, permits);
    out.extend_from_slice(&tail);
    Some(out)
}

/// A decoded member: its id bytes and its permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    pub id: &'a [u8],
    pub permits: u32,
}

/// Decodes a member the way Redisson's `struct.unpack('Bc0I', m)` does: read the length byte,
/// skip that many id bytes, read 4 bytes of permits. Trailing bytes are ignored, as Lua does.
pub fn decode_member(bytes: &[u8]) -> Result<Member<'_>, MemberError> {
    let (&len, rest) = bytes.split_first().ok_or(MemberError::Empty)?;
    let len = usize::from(len);
    let id = rest.get(..len).ok_or(MemberError::Truncated)?;
    let permits = rest
        .get(len..len + 4)
        .map(LittleEndian::read_u32)
        .ok_or(MemberError::Truncated)?;
    Ok(Member { id, permits })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberError {
    Empty,
    Truncated,
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemberError::Empty => f.write_str("empty permit entry"),
            MemberError::Truncated => f.write_str("permit entry shorter than its length byte says"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_wrapped_in_a_hash_tag() {
        let keys = StateKeys::overall(b"api");
        assert_eq!(keys.value, b"{api}:value");
        assert_eq!(keys.permits, b"{api}:permits");
    }

    #[test]
    fn names_with_a_brace_are_suffixed_unwrapped() {
        let keys = StateKeys::overall(b"{user:1}.api");
        assert_eq!(keys.value, b"{user:1}.api:value");
        assert_eq!(keys.permits, b"{user:1}.api:permits");
        // Even an unbalanced brace counts, as in Redisson.
        assert_eq!(StateKeys::overall(b"a{b").value, b"a{b:value");
    }

    #[test]
    fn client_keys_append_the_client_id() {
        let keys = StateKeys::client(b"api", b"6f1c-uuid");
        assert_eq!(keys.value, b"{api}:value:6f1c-uuid");
        assert_eq!(keys.permits, b"{api}:permits:6f1c-uuid");
    }

    #[test]
    fn hash_slots_match_redis_cluster() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(hash_slot(b"foo"), 12182);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        assert_eq!(hash_slot(b"foo{}{bar}"), hash_slot(b"foo{}{bar}"));
        assert_ne!(hash_slot(b"foo{}{bar}"), hash_slot(b"bar"));
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
    }

    #[test]
    fn derived_keys_share_the_slot_unless_the_name_has_a_broken_tag() {
        for name in [&b"api"[..], b"{user:1}.api", b"x{tag}y", b"\xff\x00"] {
            let keys = StateKeys::client(name, b"c");
            assert_eq!(hash_slot(&keys.value), hash_slot(name), "{name:?}");
            assert_eq!(
                hash_slot(&StateKeys::overall(name).permits),
                hash_slot(name)
            );
        }
        assert_ne!(
            hash_slot(&StateKeys::overall(b"a{b").value),
            hash_slot(b"a{b")
        );
        assert_ne!(
            hash_slot(&StateKeys::overall(b"{}x").value),
            hash_slot(b"{}x")
        );
    }

    #[test]
    fn the_overall_check_covers_client_keys() {
        for name in [
            &b"api"[..],
            b"{t}x",
            b"a{b}c",
            b"a{b",
            b"{}x",
            b"x}y",
            b"}x",
            b"{",
        ] {
            if derived_keys_share_slot(name) {
                for client in [&b"c"[..], b"}", b"{", b"x}y{z}"] {
                    let keys = StateKeys::client(name, client);
                    assert_eq!(
                        hash_slot(&keys.value),
                        hash_slot(name),
                        "{name:?} {client:?}"
                    );
                    assert_eq!(hash_slot(&keys.permits), hash_slot(name));
                }
            }
        }
        assert!(derived_keys_share_slot(b"api") && derived_keys_share_slot(b"a{b}c"));
        for broken in [&b"a{b"[..], b"{}x", b"x}y", b"}x"] {
            assert!(!derived_keys_share_slot(broken), "{broken:?}");
        }
    }

    #[test]
    fn member_layout_is_length_id_and_little_endian_permits() {
        let id = [7u8; ID_LEN];
        let m = encode_member(&id, 0x0102_0304);
        assert_eq!(m.len(), 21);
        assert_eq!(m[0], 0x10);
        assert_eq!(&m[1..17], &id);
        assert_eq!(&m[17..], &[0x04, 0x03, 0x02, 0x01]);
        let decoded = decode_member(&m).unwrap();
        assert_eq!(decoded.id, &id);
        assert_eq!(decoded.permits, 0x0102_0304);
    }

    #[test]
    fn decoder_accepts_other_id_lengths_and_trailing_bytes() {
        let m = [3u8, b'a', b'b', b'c', 5, 0, 0, 0, 0xee];
        let decoded = decode_member(&m).unwrap();
        assert_eq!(decoded.id, b"abc");
        assert_eq!(decoded.permits, 5);
        // The 8-byte ids of older Redisson versions.
        let old = reencode_member(&[9u8; 8], 2).unwrap();
        assert_eq!(decode_member(&old).unwrap().permits, 2);
    }

    #[test]
    fn decoder_rejects_truncated_members() {
        assert_eq!(decode_member(b""), Err(MemberError::Empty));
        assert_eq!(decode_member(&[16u8, 1, 2]), Err(MemberError::Truncated));
        assert_eq!(decode_member(&[0u8, 1, 2, 3]), Err(MemberError::Truncated));
        assert_eq!(decode_member(&[255u8; 20]), Err(MemberError::Truncated));
    }

    #[test]
    fn reencode_keeps_the_id() {
        let id = [1u8; ID_LEN];
        assert_eq!(
            reencode_member(&id, 9).unwrap(),
            encode_member(&id, 9).to_vec()
        );
        assert!(reencode_member(&[0u8; 256], 1).is_none());
    }
}
