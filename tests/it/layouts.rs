//! Every permit-log member layout a Redisson release has written is read right, and a member that
//! fits none of them exactly is the corrupt-data error with nothing written:
//!
//! - 3.17.0+ `struct.pack('Bc0I', #id, id, permits)`: a length byte, the id, the permits;
//! - 3.16.4-3.16.8 `struct.pack('Lc0I', #id, id, permits)`: an 8-byte length, the id, the permits;
//! - 3.13.3-3.16.3 `struct.pack('fI', random, permits)`: a 4-byte float, the permits.
//!
//! Members are planted with ZADD of raw bytes, as a Redisson client of that release left them.

use crate::common::*;

/// `Bc0I`: what Redisson 3.17.0+ and this module write (16-byte ids).
fn bc0i(id: &[u8], permits: u32) -> Vec<u8> {
    let mut out = vec![u8::try_from(id.len()).expect("id of at most 255 bytes")];
    out.extend_from_slice(id);
    out.extend_from_slice(&permits.to_le_bytes());
    out
}

/// `Lc0I`: Redisson 3.16.4-3.16.8 (8-byte random ids, so 20-byte members).
fn lc0i(id: &[u8], permits: u32) -> Vec<u8> {
    let mut out = (id.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(id);
    out.extend_from_slice(&permits.to_le_bytes());
    out
}

/// `fI`: Redisson 3.13.3-3.16.3 (a random float, so 8-byte members).
fn fi(random: f32, permits: u32) -> Vec<u8> {
    let mut out = random.to_le_bytes().to_vec();
    out.extend_from_slice(&permits.to_le_bytes());
    out
}

/// One member of each layout, each built by `make(n, permits)` with a distinct id per `n`.
type Layout = (&'static str, fn(u8, u32) -> Vec<u8>);

const LAYOUTS: [Layout; 4] = [
    ("bc0i", |n, p| bc0i(&[n; 16], p)),
    ("lc0i", |n, p| lc0i(&[n; 8], p)),
    ("fi", |n, p| fi(f32::from(n) / 256.0, p)),
    // 8 bytes whose first byte, 3, would also make a Bc0I member: read as fI, same permits.
    ("ambiguous", |n, p| {
        let mut m = vec![3u8, n, n, n];
        m.extend_from_slice(&p.to_le_bytes());
        m
    }),
];

fn zadd(con: &mut Connection, log: &str, score: i64, member: &[u8]) {
    let added: i64 = run(
        con,
        &[
            b"ZADD",
            log.as_bytes(),
            score.to_string().as_bytes(),
            member,
        ],
    )
    .unwrap();
    assert_eq!(added, 1, "{member:?} planted");
}

/// The log's entries, oldest first: score and raw member.
fn log_of(con: &mut Connection, log: &str) -> Vec<(i64, Vec<u8>)> {
    log_entries(con, log)
        .into_iter()
        .map(|(member, score)| (score, member))
        .collect()
}

#[test]
fn lua_struct_pack_writes_exactly_these_bytes() {
    // The builders above are checked against the packing the Redisson scripts used, on this
    // server's Lua: `L` is an 8-byte unsigned long, `f` a 4-byte float, both little-endian.
    let server = Server::start();
    let mut con = server.conn();
    let id8 = b"\x01\x02\x03\x04\x05\x06\x07\xf8";
    let packed = |con: &mut Connection, script: &str, args: &[&[u8]]| -> Vec<u8> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script).arg(0);
        for arg in args {
            cmd.arg(*arg);
        }
        cmd.query(con).expect("EVAL struct.pack")
    };
    assert_eq!(
        packed(
            &mut con,
            "return struct.pack('Lc0I', string.len(ARGV[1]), ARGV[1], tonumber(ARGV[2]))",
            &[id8, b"4294967295"],
        ),
        lc0i(id8, u32::MAX)
    );
    assert_eq!(
        packed(
            &mut con,
            "return struct.pack('fI', tonumber(ARGV[1]), tonumber(ARGV[2]))",
            &[b"0.625", b"7"],
        ),
        fi(0.625, 7)
    );
    assert_eq!(
        packed(
            &mut con,
            "return struct.pack('Bc0I', string.len(ARGV[1]), ARGV[1], tonumber(ARGV[2]))",
            &[&[0xabu8; 16], b"3"],
        ),
        bc0i(&[0xab; 16], 3)
    );
}

#[test]
fn available_and_tryacquire_read_every_layout() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for (name, make) in LAYOUTS {
        let log = format!("{{{name}}}:permits");
        line::<i64>(
            &mut con,
            &format!("HSET {name} rate 10 interval 1000 type 0 keepAliveTime 0"),
        )
        .unwrap();
        zadd(&mut con, &log, T0 - 800, &make(1, 4));
        zadd(&mut con, &log, T0 - 200, &make(2, 3));
        let planted = log_of(&mut con, &log);

        // No value key: the live log is summed, 10 - 4 - 3.
        assert_eq!(available(&mut con, name), 3, "{name}");
        // 4 wanted: free once the entry of 4 expires, at T0 + 200. Nothing is pruned yet.
        assert_eq!(try_acquire(&mut con, name, 4), Some(200), "{name}");
        assert_eq!(log_of(&mut con, &log), planted, "{name}");

        advance(&mut con, 200);
        // The entry of 4 has expired: counted back, and pruned by the grant.
        assert_eq!(available(&mut con, name), 7, "{name}");
        assert_eq!(try_acquire(&mut con, name, 7), None, "{name}");
        assert_eq!(
            get(&mut con, &format!("{{{name}}}:value")).as_deref(),
            Some("0")
        );
        let log_now = log_of(&mut con, &log);
        assert_eq!(log_now.len(), 2, "{name}: {log_now:?}");
        assert_eq!(
            log_now[0], planted[1],
            "{name}: the live member is untouched"
        );
        assert_eq!(
            log_now[1].1.len(),
            21,
            "{name}: the module writes the 3.17+ layout"
        );
        assert_eq!(member_permits(&log_now[1].1), 7);
        assert_eq!(log_now[1].0, T0 + 200);

        // With the value gone, the log (both layouts) is summed again: 10 - 3 - 7 = 0, and the
        // entry of 3 frees 3 permits at T0 + 800.
        line::<i64>(&mut con, &format!("DEL {{{name}}}:value")).unwrap();
        assert_eq!(available(&mut con, name), 0, "{name}");
        assert_eq!(try_acquire(&mut con, name, 3), Some(600), "{name}");
        advance(&mut con, 600);
        assert_eq!(available(&mut con, name), 3, "{name}");
        set_clock(&mut con, T0);
    }
}

#[test]
fn release_removes_and_splits_every_layout() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for (name, make) in LAYOUTS {
        let log = format!("{{{name}}}:permits");
        let value = format!("{{{name}}}:value");
        line::<i64>(
            &mut con,
            &format!("HSET {name} rate 10 interval 1000 type 0 keepAliveTime 0"),
        )
        .unwrap();
        let older = make(1, 5);
        let newest = make(2, 4);
        zadd(&mut con, &log, T0 - 300, &older);
        zadd(&mut con, &log, T0 - 100, &newest);
        line::<()>(&mut con, &format!("SET {value} 1")).unwrap();

        // 6 released: the newest entry (4) goes, the older one (5) is split down to 3.
        let released: i64 = line(&mut con, &format!("RATELIMIT.RELEASE {name} 6")).unwrap();
        assert_eq!(released, 6, "{name}");
        assert_eq!(get(&mut con, &value).as_deref(), Some("7"), "{name}");
        let log_now = log_of(&mut con, &log);
        assert_eq!(log_now.len(), 1, "{name}: {log_now:?}");
        let (score, split) = &log_now[0];
        assert_eq!(*score, T0 - 300, "{name}: the split entry keeps its score");
        // It keeps its id and is written in the 3.17+ layout: the fI id is the float's 4 bytes,
        // the Lc0I id the 8 bytes after the length.
        let id: &[u8] = match name {
            "bc0i" => &older[1..17],
            "lc0i" => &older[8..16],
            _ => &older[..4],
        };
        assert_eq!(*split, bc0i(id, 3), "{name}");
        assert_eq!(available(&mut con, name), 7, "{name}");

        // The split member is read back like any other: released in full, the log is empty.
        let released: i64 = line(&mut con, &format!("RATELIMIT.RELEASE {name} 10")).unwrap();
        assert_eq!(released, 3, "{name}");
        assert!(log_of(&mut con, &log).is_empty(), "{name}");
        assert_eq!(get(&mut con, &value).as_deref(), Some("10"), "{name}");
    }
}

#[test]
fn lc0i_ids_of_any_length_are_read() {
    // Ids other than Redisson's 8 bytes, up to one longer than a length byte can say.
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(
        &mut con,
        "HSET odd rate 100 interval 1000 type 0 keepAliveTime 0",
    )
    .unwrap();
    // Oldest first; each is split or removed in turn, newest first.
    let ids: [&[u8]; 4] = [&[7u8; 255], b"", b"abc", &[9u8; 300]];
    for (i, id) in ids.iter().enumerate() {
        zadd(
            &mut con,
            "{odd}:permits",
            T0 - 500 + i as i64,
            &lc0i(id, 10),
        );
    }
    assert_eq!(available(&mut con, "odd"), 60);
    let release = |con: &mut Connection, permits: u32| -> i64 {
        line(con, &format!("RATELIMIT.RELEASE odd {permits}")).unwrap()
    };
    // The 300-byte id is the newest: released whole, it needs no re-encoding.
    assert_eq!(release(&mut con, 10), 10);
    assert_eq!(available(&mut con, "odd"), 70);
    // The 3-byte id, split: [3]abc + permits is 8 bytes, which then reads as fI, whose
    // permits are the same last 4 bytes.
    assert_eq!(release(&mut con, 5), 5);
    let log_now = log_of(&mut con, "{odd}:permits");
    assert_eq!(log_now.len(), 3, "{log_now:?}");
    assert_eq!(log_now[2], (T0 - 498, bc0i(b"abc", 5)));
    assert_eq!(available(&mut con, "odd"), 75);
    // That 8-byte member is read back (released whole), the empty id is split.
    assert_eq!(release(&mut con, 10), 10);
    let log_now = log_of(&mut con, "{odd}:permits");
    assert_eq!(log_now.len(), 2, "{log_now:?}");
    assert_eq!(log_now[1], (T0 - 499, bc0i(b"", 5)));
    // The empty id goes, the 255-byte id is split into a 260-byte 3.17+ member.
    assert_eq!(release(&mut con, 6), 6);
    let log_now = log_of(&mut con, "{odd}:permits");
    assert_eq!(log_now, vec![(T0 - 500, bc0i(&[7u8; 255], 9))]);
    line::<i64>(&mut con, "DEL {odd}:value").unwrap();
    assert_eq!(available(&mut con, "odd"), 91);
}

#[test]
fn an_lc0i_id_too_long_to_re_encode_is_an_error_on_split() {
    // A split writes the 3.17+ layout, whose length byte can't hold a 256-byte id: RELEASE
    // refuses rather than write a member that would not decode, and writes nothing.
    let mut server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(
        &mut con,
        "HSET long rate 10 interval 1000 type 0 keepAliveTime 0",
    )
    .unwrap();
    zadd(&mut con, "{long}:permits", T0 - 100, &lc0i(&[1u8; 256], 4));
    line::<()>(&mut con, "SET {long}:value 6").unwrap();
    assert_eq!(available(&mut con, "long"), 6);
    let err = fails_unchanged(&mut server, &mut con, "RATELIMIT.RELEASE long 1");
    assert_eq!(
        err,
        "ERR corrupt rate limiter key '{long}:permits': permit entry id too long"
    );
}

/// Runs a command that must fail; asserts the dataset (keys, contents, expiries) is unchanged
/// and the server alive. Returns the error line.
fn fails_unchanged(server: &mut Server, con: &mut Connection, text: &str) -> String {
    let before = snapshot(con);
    let err = error_of(con, text);
    assert_eq!(
        snapshot(con),
        before,
        "`{text}` failed with `{err}` but wrote"
    );
    assert!(server.is_alive(), "`{text}` killed the server");
    err
}

/// Members that fit no layout exactly: each layout one byte short and one byte over, lengths
/// that would overflow or wrap around, and an empty member.
fn misfits() -> Vec<(&'static str, Vec<u8>)> {
    let with = |mut m: Vec<u8>, extra: &[u8]| {
        m.extend_from_slice(extra);
        m
    };
    let lc = lc0i(&[5u8; 8], 2);
    let mut huge = u64::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(&[0u8; 12]);
    let mut wraps = u64::MAX.to_le_bytes().to_vec();
    wraps.extend_from_slice(&[0u8; 3]);
    vec![
        ("bc0i-short", bc0i(&[4u8; 16], 2)[..20].to_vec()),
        ("bc0i-over", with(bc0i(&[4u8; 16], 2), b"\x00")),
        ("bc0i-no-permits", bc0i(&[4u8; 16], 2)[..17].to_vec()),
        ("lc0i-short", lc[..19].to_vec()),
        ("lc0i-over", with(lc.clone(), b"\x00")),
        ("lc0i-huge", huge),
        ("lc0i-wraps", wraps),
        ("fi-short", fi(0.5, 2)[..7].to_vec()),
        ("fi-over", with(fi(0.5, 2), b"\x00")),
        ("empty", Vec::new()),
    ]
}

#[test]
fn misfits_are_the_corrupt_data_error_with_nothing_written() {
    let mut server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for (name, member) in misfits() {
        // Live, with the value key missing: every command sums the log and reaches the member.
        line::<i64>(
            &mut con,
            &format!("RATELIMIT.SETRATE {name} 10 1000 KEEPALIVE 60000"),
        )
        .unwrap();
        assert_eq!(try_acquire(&mut con, name, 2), None);
        let log = format!("{{{name}}}:permits");
        zadd(&mut con, &log, T0 - 500, &member);
        line::<i64>(&mut con, &format!("DEL {{{name}}}:value")).unwrap();
        let problem = if member.is_empty() {
            "empty permit entry".to_string()
        } else {
            format!(
                "permit entry of {} bytes fits no Redisson member layout",
                member.len()
            )
        };
        let expected = format!("ERR corrupt rate limiter key '{log}': {problem}");
        for cmd in [
            format!("RATELIMIT.AVAILABLE {name}"),
            format!("RATELIMIT.TRYACQUIRE {name}"),
            format!("RATELIMIT.TRYACQUIRE {name} 10"),
            format!("RATELIMIT.RELEASE {name} 5"),
            format!("RATELIMIT.SETRATE {name} 20 1000 KEEPSTATE"),
        ] {
            assert_eq!(
                fails_unchanged(&mut server, &mut con, &cmd),
                expected,
                "{cmd}"
            );
        }
    }
    // Expired, behind a valid value: the grant that would prune it reads it first.
    line::<i64>(&mut con, "RATELIMIT.SETRATE old 10 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "old", 1), None);
    zadd(&mut con, "{old}:permits", T0 - 5000, &fi(0.5, 2)[..7]);
    let err = fails_unchanged(&mut server, &mut con, "RATELIMIT.TRYACQUIRE old");
    assert_eq!(
        err,
        "ERR corrupt rate limiter key '{old}:permits': permit entry of 7 bytes fits no Redisson \
         member layout"
    );
}
