//! The keyspace contract shared with Redisson's `RRateLimiter`: key names, hash fields, and the
//! byte encoding of permit-log members. Everything that must stay byte-compatible lives here.

// Pure logic: no FFI here.
#![forbid(unsafe_code)]

use std::ffi::CStr;

use byteorder::{ByteOrder, LittleEndian};

/// Hash field names, exactly as Redisson writes them.
pub const FIELD_RATE: &CStr = c"rate";
pub const FIELD_INTERVAL: &CStr = c"interval";
pub const FIELD_TYPE: &CStr = c"type";
pub const FIELD_KEEP_ALIVE: &CStr = c"keepAliveTime";
/// The module's own field: grants within this many milliseconds share a log entry. Redisson
/// ignores fields it does not know; a missing one means 1 (exact).
pub const FIELD_PRECISION: &CStr = c"precision";

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
    pub value: KeyName,
    pub permits: KeyName,
}

/// A limiter state's identity, what its waiters' queue and its tickets are keyed by: its
/// database and its permits key's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateId {
    pub db: i32,
    pub permits_key: Vec<u8>,
}

/// Whether `key` is named as a limiter's value or permits key (`{name}:value`,
/// `name{tag}:permits`, `{name}:value:<client>` ...): a suffix after a name that contains `{`.
pub fn is_state_key_name(key: &[u8]) -> bool {
    [&b":value"[..], b":permits"].iter().any(|suffix| {
        key.windows(suffix.len()).enumerate().any(|(at, window)| {
            let after = key.get(at + suffix.len()..).unwrap_or_default();
            window == *suffix
                && key.get(..at).is_some_and(|base| base.contains(&b'{'))
                && (after.is_empty() || after.first() == Some(&b':'))
        })
    })
}

impl StateKeys {
    /// The OVERALL state of limiter `name`: `{name}:value`, `{name}:permits`.
    pub fn overall(name: &[u8]) -> Self {
        StateKeys {
            value: suffixed(name, b"value", None),
            permits: suffixed(name, b"permits", None),
        }
    }

    /// One client's state: `{name}:value:<client>`, `{name}:permits:<client>`. The value and
    /// permits names already contain `{`, so the client id is appended unwrapped.
    pub fn client(name: &[u8], client: &[u8]) -> Self {
        StateKeys {
            value: suffixed(name, b"value", Some(client)),
            permits: suffixed(name, b"permits", Some(client)),
        }
    }
}

/// A derived key name, built where the call is: in place up to [`KeyName::INLINE`] bytes, so
/// the common call allocates nothing for its key names, on the heap beyond.
#[derive(Debug, Clone)]
pub enum KeyName {
    Inline {
        len: usize,
        bytes: [u8; KeyName::INLINE],
    },
    Heap(Vec<u8>),
}

impl KeyName {
    pub const INLINE: usize = 96;

    fn from_parts(parts: &[&[u8]]) -> KeyName {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > Self::INLINE {
            return KeyName::Heap(parts.concat());
        }
        let mut bytes = [0u8; Self::INLINE];
        let mut at = 0;
        for part in parts {
            if let Some(place) = bytes.get_mut(at..at + part.len()) {
                place.copy_from_slice(part);
            }
            at += part.len();
        }
        KeyName::Inline { len, bytes }
    }
}

impl std::ops::Deref for KeyName {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            KeyName::Inline { len, bytes } => bytes.get(..*len).unwrap_or_default(),
            KeyName::Heap(bytes) => bytes,
        }
    }
}

impl PartialEq for KeyName {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for KeyName {}

impl<const N: usize> PartialEq<&[u8; N]> for KeyName {
    fn eq(&self, other: &&[u8; N]) -> bool {
        **self == other[..]
    }
}

/// Redisson's `suffixName`: wrap the name in a hash tag unless it already contains `{`; then
/// `:suffix`, and `:client` for one client's state.
fn suffixed(name: &[u8], suffix: &[u8], client: Option<&[u8]>) -> KeyName {
    let (open, close): (&[u8], &[u8]) = if name.contains(&b'{') {
        (b"", b":")
    } else {
        (b"{", b"}:")
    };
    match client {
        None => KeyName::from_parts(&[open, name, close, suffix]),
        Some(client) => KeyName::from_parts(&[open, name, close, suffix, b":", client]),
    }
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

/// A member exactly as [`encode_member`] writes one of `permits`, as a fixed array; `None` for
/// any other layout or count. A grant may take such an expired entry over (see the store's
/// `recycle`): what it logs is then byte for byte what a fresh entry would be, but for the id.
pub fn fresh_layout(member: &[u8], permits: u32) -> Option<[u8; MEMBER_LEN]> {
    let bytes: [u8; MEMBER_LEN] = member.try_into().ok()?;
    let (head, tail) = bytes.split_at(1 + ID_LEN);
    (head.first() == Some(&(ID_LEN as u8)) && LittleEndian::read_u32(tail) == permits)
        .then_some(bytes)
}

/// Re-encodes a member with another permit count, keeping its id, in the 3.17+ layout whatever
/// layout it came in. Used when a release splits an entry. `None` for an id over 255 bytes (only
/// a 3.16.4-3.16.8 member can have one; Redisson's were 8 bytes), which a length byte can't say.
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
    /// The bytes that make the member unique. RELEASE re-encodes them with
    /// [`reencode_member`] when it splits an entry, so a split always writes the 3.17+ layout.
    pub id: &'a [u8],
    pub permits: u32,
}

/// Size of the members Redisson 3.13.3-3.16.3 wrote with `struct.pack('fI', random, permits)`:
/// a 4-byte float, then the permits.
const FI_LEN: usize = 8;
/// Size of the length prefix of Redisson 3.16.4-3.16.8's `struct.pack('Lc0I', len, id,
/// permits)`: a C `unsigned long`, 8 bytes little-endian on the 64-bit servers Redis runs on.
const LC0I_PREFIX: usize = 8;
/// Size of the permits field that ends every layout: an unsigned 32-bit little-endian integer.
const PERMITS_LEN: usize = 4;

/// Decodes a member written by any Redisson release that had a permit log. A member is accepted
/// only if its length fits one layout exactly; every layout ends with the permits, so they are
/// then its last 4 bytes. Checked in this order:
///
/// - exactly 8 bytes: 3.13.3-3.16.3 `fI` (the id is the float), whatever byte 0 holds, even
///   though a length byte of 3 would also make it a 3.17+ member;
/// - `1 + byte0 + 4` bytes: 3.17.0+ `Bc0I` (the layout this module writes);
/// - `8 + u64le(bytes 0..8) + 4` bytes: 3.16.4-3.16.8 `Lc0I`. No member fits both this and
///   `Bc0I`: a `Bc0I` member has at most 260 bytes, so the u64 would have to be `byte0` itself,
///   and `byte0 + 12` is never `byte0 + 5`.
///
/// Anything else (empty, trailing bytes, a length that says more or less than the member
/// holds) is an error: guessing the permits of data nobody wrote that way could grant too much.
pub fn decode_member(bytes: &[u8]) -> Result<Member<'_>, MemberError> {
    let (&byte0, _) = bytes.split_first().ok_or(MemberError::Empty)?;
    let len = bytes.len();
    let misfit = MemberError::NoLayout { len };
    let permits_at = len.checked_sub(PERMITS_LEN).ok_or(misfit)?;
    let id_from = if len == FI_LEN {
        0
    } else if 1 + usize::from(byte0) + PERMITS_LEN == len {
        1
    } else if fits_lc0i(bytes) {
        LC0I_PREFIX
    } else {
        return Err(misfit);
    };
    let id = bytes.get(id_from..permits_at).ok_or(misfit)?;
    let permits = bytes
        .get(permits_at..)
        .map(LittleEndian::read_u32)
        .ok_or(misfit)?;
    Ok(Member { id, permits })
}

/// Whether `bytes` is exactly an 8-byte little-endian length, that many id bytes and the
/// permits. The length can be any u64, so the sum is checked rather than trusted to fit.
fn fits_lc0i(bytes: &[u8]) -> bool {
    let Some(prefix) = bytes.get(..LC0I_PREFIX) else {
        return false;
    };
    let id_len = LittleEndian::read_u64(prefix);
    usize::try_from(id_len)
        .ok()
        .and_then(|id_len| id_len.checked_add(LC0I_PREFIX + PERMITS_LEN))
        .is_some_and(|total| total == bytes.len())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberError {
    Empty,
    /// The member's length fits none of the layouts Redisson has written.
    NoLayout {
        len: usize,
    },
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemberError::Empty => f.write_str("empty permit entry"),
            MemberError::NoLayout { len } => write!(
                f,
                "permit entry of {len} bytes fits no Redisson member layout"
            ),
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

    /// `struct.pack('Lc0I', #id, id, permits)`, as Redisson 3.16.4-3.16.8 wrote it.
    fn lc0i(id: &[u8], permits: u32) -> Vec<u8> {
        let mut out = (id.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(id);
        out.extend_from_slice(&permits.to_le_bytes());
        out
    }

    /// `struct.pack('fI', random, permits)`, as Redisson 3.13.3-3.16.3 wrote it.
    fn fi(random: f32, permits: u32) -> Vec<u8> {
        let mut out = random.to_le_bytes().to_vec();
        out.extend_from_slice(&permits.to_le_bytes());
        out
    }

    #[test]
    fn decoder_reads_bc0i_members_with_any_id_length() {
        for id_len in [0usize, 1, 2, 4, 8, 15, 16, 17, 255] {
            let id: Vec<u8> = (0..id_len).map(|i| i as u8 ^ 0x5a).collect();
            let m = reencode_member(&id, 0xdead_beef).unwrap();
            assert_eq!(m.len(), 1 + id_len + 4);
            if m.len() == 8 {
                continue; // 8 bytes always read as fI: see the next test
            }
            let decoded = decode_member(&m).unwrap();
            assert_eq!((decoded.id, decoded.permits), (&id[..], 0xdead_beef));
        }
    }

    #[test]
    fn eight_bytes_are_always_fi() {
        let m = fi(0.375, 9);
        assert_eq!(m.len(), 8);
        let decoded = decode_member(&m).unwrap();
        assert_eq!(
            (decoded.id, decoded.permits),
            (&0.375f32.to_le_bytes()[..], 9)
        );
        // Byte 0 = 3 would also make it a Bc0I member with a 3-byte id: still fI, and the
        // permits are the same last 4 bytes either way.
        let ambiguous = [3u8, b'a', b'b', b'c', 7, 0, 0, 0];
        let decoded = decode_member(&ambiguous).unwrap();
        assert_eq!((decoded.id, decoded.permits), (&ambiguous[..4], 7));
        for byte0 in [0u8, 3, 4, 16, 255] {
            let mut m = fi(0.5, u32::MAX);
            m[0] = byte0;
            assert_eq!(decode_member(&m).unwrap().permits, u32::MAX, "{byte0}");
        }
    }

    #[test]
    fn decoder_reads_lc0i_members() {
        for id_len in [0usize, 1, 8, 16, 243, 244, 300] {
            let id = vec![0xc3u8; id_len];
            let m = lc0i(&id, 41);
            let decoded = decode_member(&m).unwrap();
            assert_eq!((decoded.id, decoded.permits), (&id[..], 41), "{id_len}");
        }
        // The 8-byte random ids Redisson 3.16.4-3.16.8 drew: 20 bytes in all.
        let m = lc0i(b"\x01\x02\x03\x04\x05\x06\x07\x08", 3);
        assert_eq!(m.len(), 20);
        assert_eq!(decode_member(&m).unwrap().permits, 3);
    }

    #[test]
    fn decoder_rejects_bc0i_misfits() {
        let good = encode_member(&[0xab; ID_LEN], 7);
        let misfit = |len| Err(MemberError::NoLayout { len });
        assert_eq!(decode_member(b""), Err(MemberError::Empty));
        assert_eq!(decode_member(&good[..20]), misfit(20), "one byte short");
        assert_eq!(decode_member(&good[..17]), misfit(17), "permits missing");
        assert_eq!(decode_member(&good[..1]), misfit(1), "length byte alone");
        let mut long = good.to_vec();
        long.push(0);
        assert_eq!(decode_member(&long), misfit(22), "a trailing byte");
        assert_eq!(decode_member(&[16u8, 1, 2]), misfit(3));
        assert_eq!(decode_member(&[0u8, 1, 2, 3]), misfit(4));
        assert_eq!(decode_member(&[0u8, 1, 2, 3, 4, 5]), misfit(6));
        assert_eq!(decode_member(&[255u8; 20]), misfit(20));
        assert_eq!(decode_member(&[255u8; 261]), misfit(261));
        assert_eq!(decode_member(b"junk"), misfit(4));
    }

    #[test]
    fn decoder_rejects_fi_misfits() {
        // One byte short of or over 8, when no other layout fits either.
        let m = fi(0.25, 5);
        assert_eq!(
            decode_member(&m[..7]),
            Err(MemberError::NoLayout { len: 7 })
        );
        let mut over = m.clone();
        over.push(0);
        assert_eq!(decode_member(&over), Err(MemberError::NoLayout { len: 9 }));
    }

    #[test]
    fn decoder_rejects_lc0i_misfits() {
        let m = lc0i(&[1u8; 8], 3);
        let misfit = |len| Err(MemberError::NoLayout { len });
        assert_eq!(decode_member(&m[..19]), misfit(19), "one byte short");
        let mut over = m.clone();
        over.push(0);
        assert_eq!(decode_member(&over), misfit(21), "a trailing byte");
        // Huge lengths: none may overflow, and none may wrap around to the member's size
        // (u64::MAX - 2 + 12 would wrap to 9 in 64 bits, u64::MAX + 12 to 11).
        for claimed in [u64::MAX, 1 << 63, u64::MAX - 11, 1 << 32] {
            let mut huge = claimed.to_le_bytes().to_vec();
            huge.extend_from_slice(&[0u8; 12]);
            assert_eq!(decode_member(&huge), misfit(20), "{claimed:#x}");
        }
        for (claimed, len) in [(u64::MAX - 2, 9), (u64::MAX - 1, 10), (u64::MAX, 11)] {
            let mut wraps = claimed.to_le_bytes().to_vec();
            wraps.resize(len, 0);
            assert_eq!(decode_member(&wraps), misfit(len), "{claimed:#x}");
        }
        // An empty id missing a byte of its permits, and a length that says one byte more.
        assert_eq!(decode_member(&lc0i(&[], 1)[..11]), misfit(11));
        let mut wrong = lc0i(&[9u8; 4], 2);
        wrong[0] = 5;
        assert_eq!(decode_member(&wrong), misfit(16));
    }

    #[test]
    fn a_split_member_keeps_a_layout_and_its_permits() {
        // RELEASE re-encodes a split entry from the decoded id: whatever layout it came in, the
        // result decodes again, with the new permits.
        let members = [
            encode_member(&[4u8; ID_LEN], 9).to_vec(),
            fi(0.75, 9),
            lc0i(&[5u8; 8], 9),
            lc0i(&[6u8; 3], 9),
            lc0i(&[], 9),
            lc0i(&[7u8; 255], 9),
        ];
        for m in members {
            let id = decode_member(&m).unwrap().id;
            let split = reencode_member(id, 4).unwrap();
            assert_eq!(decode_member(&split).unwrap().permits, 4, "{m:?}");
        }
        // An Lc0I id longer than a length byte can say can't be re-encoded: RELEASE reports it.
        let long = lc0i(&[8u8; 256], 9);
        let id = decode_member(&long).unwrap().id;
        assert_eq!(reencode_member(id, 4), None);
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
