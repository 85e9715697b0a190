//! The naming rule of derived keys against a real server: plain names are wrapped in a hash tag,
//! names containing `{` get the suffix unwrapped, client ids are appended, and any bytes work.

use crate::common::*;

/// Every key in the database, sorted.
fn keys(con: &mut Connection) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).expect("KEYS");
    keys.sort();
    keys
}

fn sorted(mut names: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    names.sort();
    names
}

/// `parts` concatenated.
fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn get(con: &mut Connection, key: &[u8]) -> Option<Vec<u8>> {
    run(con, &[b"GET", key]).expect("GET")
}

fn log_len(con: &mut Connection, key: &[u8]) -> i64 {
    run(con, &[b"ZCARD", key]).expect("ZCARD")
}

#[test]
fn a_plain_name_is_wrapped_in_a_hash_tag() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 2 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    assert_eq!(
        keys(&mut con),
        sorted(vec![
            b"api".to_vec(),
            b"{api}:value".to_vec(),
            b"{api}:permits".to_vec()
        ])
    );
    assert_eq!(get(&mut con, b"{api}:value"), Some(b"1".to_vec()));
    assert_eq!(log_len(&mut con, b"{api}:permits"), 1);
}

#[test]
fn a_name_containing_a_brace_gets_the_suffix_unwrapped() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for name in ["{user:1}.api", "a{b"] {
        let _: i64 = line(&mut con, &format!("RATELIMIT.SETRATE {name} 2 1000")).unwrap();
        assert_eq!(try_acquire(&mut con, name, 2), None);
    }
    assert_eq!(
        keys(&mut con),
        sorted(vec![
            b"{user:1}.api".to_vec(),
            b"{user:1}.api:value".to_vec(),
            b"{user:1}.api:permits".to_vec(),
            b"a{b".to_vec(),
            b"a{b:value".to_vec(),
            b"a{b:permits".to_vec(),
        ])
    );
    // The state is read back from those keys: the budget is spent.
    assert_eq!(try_acquire(&mut con, "{user:1}.api", 1), Some(1000));
    assert_eq!(try_acquire(&mut con, "a{b", 1), Some(1000));
    // A wrapped decoy is not the limiter's state: a reset leaves it and clears the real keys.
    let _: () = line(&mut con, "SET {{user:1}.api}:value 0").unwrap();
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE {user:1}.api 2 1000").unwrap();
    assert_eq!(get(&mut con, b"{user:1}.api:value"), None);
    assert_eq!(log_len(&mut con, b"{user:1}.api:permits"), 0);
    assert_eq!(get(&mut con, b"{{user:1}.api}:value"), Some(b"0".to_vec()));
    assert_eq!(try_acquire(&mut con, "{user:1}.api", 2), None);
}

#[test]
fn client_keys_append_the_client_id_to_the_derived_names() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let uuid = "0b7d5c1e-8f0a-4b8e-a2c4-3d9e6f1a2b3c";
    for (name, client) in [("api", uuid), ("{user:1}.api", "c"), ("a{b", "c")] {
        let _: i64 = line(
            &mut con,
            &format!("RATELIMIT.SETRATE {name} 2 1000 PER_CLIENT"),
        )
        .unwrap();
        let acquired: Option<i64> = line(
            &mut con,
            &format!("RATELIMIT.TRYACQUIRE {name} 1 CLIENT {client}"),
        )
        .unwrap();
        assert_eq!(acquired, None);
    }
    let u = uuid.as_bytes();
    assert_eq!(
        keys(&mut con),
        sorted(vec![
            b"api".to_vec(),
            cat(&[b"{api}:value:", u]),
            cat(&[b"{api}:permits:", u]),
            b"{user:1}.api".to_vec(),
            b"{user:1}.api:value:c".to_vec(),
            b"{user:1}.api:permits:c".to_vec(),
            b"a{b".to_vec(),
            b"a{b:value:c".to_vec(),
            b"a{b:permits:c".to_vec(),
        ])
    );
    assert_eq!(
        get(&mut con, &cat(&[b"{api}:value:", u])),
        Some(b"1".to_vec())
    );
}

#[test]
fn binary_and_non_utf8_names_work() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let plain: &[u8] = b"\xff\x00k";
    let braced: &[u8] = b"\x00{\xfe";
    let spaced: &[u8] = b"my api\r\n";
    for name in [plain, braced, spaced] {
        let reply: i64 = run(&mut con, &[b"RATELIMIT.SETRATE", name, b"3", b"1000"]).unwrap();
        assert_eq!(reply, 1, "{name:?}");
        let acquired: Option<i64> = run(&mut con, &[b"RATELIMIT.TRYACQUIRE", name, b"2"]).unwrap();
        assert_eq!(acquired, None, "{name:?}");
        let available: i64 = run(&mut con, &[b"RATELIMIT.AVAILABLE", name]).unwrap();
        assert_eq!(available, 1, "{name:?}");
        let config: Vec<Value> = run(&mut con, &[b"RATELIMIT.CONFIG", name]).unwrap();
        assert_eq!(config[1], Value::Int(3), "{name:?}");
    }
    assert_eq!(
        keys(&mut con),
        sorted(vec![
            plain.to_vec(),
            cat(&[b"{", plain, b"}:value"]),
            cat(&[b"{", plain, b"}:permits"]),
            braced.to_vec(),
            cat(&[braced, b":value"]),
            cat(&[braced, b":permits"]),
            spaced.to_vec(),
            cat(&[b"{", spaced, b"}:value"]),
            cat(&[b"{", spaced, b"}:permits"]),
        ])
    );
    assert_eq!(
        get(&mut con, &cat(&[b"{", plain, b"}:value"])),
        Some(b"1".to_vec())
    );
    assert_eq!(log_len(&mut con, &cat(&[braced, b":permits"])), 1);
}

#[test]
fn binary_client_ids_work() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let name: &[u8] = b"\xffbin";
    let client: &[u8] = b"\x00\xff\r\n id";
    let reply: i64 = run(
        &mut con,
        &[b"RATELIMIT.SETRATE", name, b"2", b"1000", b"PER_CLIENT"],
    )
    .unwrap();
    assert_eq!(reply, 1);
    let acquired: Option<i64> = run(
        &mut con,
        &[b"RATELIMIT.TRYACQUIRE", name, b"2", b"CLIENT", client],
    )
    .unwrap();
    assert_eq!(acquired, None);
    let refused: Option<i64> = run(
        &mut con,
        &[b"RATELIMIT.TRYACQUIRE", name, b"1", b"CLIENT", client],
    )
    .unwrap();
    assert_eq!(refused, Some(1000));
    assert_eq!(
        keys(&mut con),
        sorted(vec![
            name.to_vec(),
            cat(&[b"{", name, b"}:value:", client]),
            cat(&[b"{", name, b"}:permits:", client]),
        ])
    );
    // A client id differing only after a NUL byte is another client.
    let other = cat(&[client, b"\x00"]);
    let acquired: Option<i64> = run(
        &mut con,
        &[b"RATELIMIT.TRYACQUIRE", name, b"2", b"CLIENT", &other],
    )
    .unwrap();
    assert_eq!(acquired, None);
    assert_eq!(
        get(&mut con, &cat(&[b"{", name, b"}:value:", &other])),
        Some(b"0".to_vec())
    );
}
