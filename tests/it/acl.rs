//! ACL: the server checks the declared `key`; the module checks every key it derives from it
//! (`{N}:value`, `{N}:permits`, a client's keys) against the caller's ACL before touching any,
//! and a caller with no ACL user at all (another module's `RedisModule_Call`) is no crash.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

const PASSWORD: &str = "pw";

/// Creates (or resets) `user` with password `pw` and the given extra rules.
fn set_user(admin: &mut Connection, user: &str, rules: &str) {
    let mut words: Vec<&str> = vec!["ACL", "SETUSER", user, "reset", "on", ">pw"];
    words.extend(rules.split_whitespace());
    let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    let _: () = run(admin, &words).expect("ACL SETUSER");
}

/// A connection authenticated as `user`, with read timeouts so a bug cannot hang the test.
fn login(server: &Server, user: &str) -> Connection {
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).expect("read timeout");
    let _: () = redis::cmd("AUTH")
        .arg(user)
        .arg(PASSWORD)
        .query(&mut con)
        .expect("AUTH");
    let whoami: String = line(&mut con, "ACL WHOAMI").unwrap();
    assert_eq!(whoami, user);
    con
}

/// An admin connection (the default user) with the clock frozen and two limiters with state:
/// OVERALL `lim1` (5 per second, 2 taken) and PER_CLIENT `lim2` (client `alice` took 1).
fn setup(server: &Server) -> Connection {
    let mut admin = server.conn();
    admin.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut admin, T0);
    assert_eq!(
        line::<i64>(&mut admin, "RATELIMIT.SETRATE lim1 5 1000").unwrap(),
        1
    );
    assert_eq!(try_acquire(&mut admin, "lim1", 2), None);
    assert_eq!(
        line::<i64>(&mut admin, "RATELIMIT.SETRATE lim2 5 1000 PER_CLIENT").unwrap(),
        1
    );
    assert_eq!(
        line::<Option<i64>>(&mut admin, "RATELIMIT.TRYACQUIRE lim2 CLIENT alice").unwrap(),
        None
    );
    let keys = snapshot(&mut admin);
    let names: Vec<&[u8]> = keys.iter().map(|(k, _, _)| k.as_slice()).collect();
    assert_eq!(
        names,
        vec![
            &b"lim1"[..],
            b"lim2",
            b"{lim1}:permits",
            b"{lim1}:value",
            b"{lim2}:permits:alice",
            b"{lim2}:value:alice",
        ]
    );
    admin
}

/// The error the module gives when the caller may not touch a derived key.
fn module_noperm(key: &str) -> String {
    format!("NOPERM this user has no permissions to access the limiter key '{key}'")
}

/// Runs `text` as `con`'s user; it must fail with exactly `expected`, and the dataset (seen by
/// the admin) must be byte-for-byte unchanged, TTLs included.
fn refused_without_writes(
    admin: &mut Connection,
    con: &mut Connection,
    text: &str,
    expected: &str,
) {
    let before = snapshot(admin);
    let err = error_of(con, text);
    assert_eq!(err, expected, "`{text}`");
    assert_eq!(snapshot(admin), before, "`{text}` wrote something");
}

/// Every command that reads or writes a limiter's state, on OVERALL limiter `lim1`.
const STATE_COMMANDS: [&str; 22] = [
    "RATELIMIT.TRYACQUIRE lim1",
    "RATELIMIT.TRYACQUIRE lim1 1",
    "RATELIMIT.TRYACQUIRE lim1 5",
    "RATELIMIT.TRYACQUIRE lim1 1 CLIENT c",
    "RATELIMIT.SETRATE lim1 10 1000",
    "RATELIMIT.SETRATE lim1 10 1000 KEEPSTATE",
    "RATELIMIT.SETRATE lim1 10 1000 XX",
    "RATELIMIT.SETRATE lim1 10 2000 PER_CLIENT CLIENT c",
    "RATELIMIT.RELEASE lim1 1",
    "RATELIMIT.ACQUIRE lim1",
    "RATELIMIT.ACQUIRE lim1 5 TIMEOUT 10",
    "RATELIMIT.AVAILABLE lim1",
    "RATELIMIT.DELETE lim1",
    "RATELIMIT.DELETE lim1 CLIENT c",
    "RATELIMIT.EXPIRE lim1 100000",
    "RATELIMIT.PERSIST lim1",
    "RATELIMIT.ACQUIRE lim1 1 TIMEOUT 0",
    "RATELIMIT.ALLOW lim1",
    "RATELIMIT.ALLOW lim1 1 RATE 5 1000",
    "RATELIMIT.ALLOWALL 1 lim1",
    "RATELIMIT.ACQUIRE lim1 TICKET t",
    "RATELIMIT.CANCEL lim1 t",
];

#[test]
fn derived_keys_outside_the_users_patterns_are_refused_and_nothing_is_written() {
    let server = Server::start();
    let mut admin = setup(&server);
    set_user(&mut admin, "u", "+@all ~lim*");
    let mut con = login(&server, "u");
    for text in STATE_COMMANDS {
        refused_without_writes(&mut admin, &mut con, text, &module_noperm("{lim1}:value"));
    }
    // The same user may use what only touches the declared key.
    let config: Vec<Value> = line(&mut con, "RATELIMIT.CONFIG lim1").unwrap();
    assert_eq!(config.len(), 8);
    // The refusals were not granted behind the scenes: the admin still sees 3 available.
    assert_eq!(
        line::<i64>(&mut admin, "RATELIMIT.AVAILABLE lim1").unwrap(),
        3
    );
}

#[test]
fn explicit_module_commands_without_derived_keys_are_refused_too() {
    let server = Server::start();
    let mut admin = setup(&server);
    set_user(
        &mut admin,
        "u",
        "+ratelimit.tryacquire +ratelimit.setrate +ratelimit.release +ratelimit.acquire \
         +ratelimit.available +ratelimit.delete +ratelimit.config +acl|whoami ~lim*",
    );
    let mut con = login(&server, "u");
    for text in [
        "RATELIMIT.TRYACQUIRE lim1",
        "RATELIMIT.SETRATE lim1 10 1000",
        "RATELIMIT.RELEASE lim1 1",
        "RATELIMIT.ACQUIRE lim1 1 TIMEOUT 10",
        "RATELIMIT.AVAILABLE lim1",
        "RATELIMIT.DELETE lim1",
    ] {
        refused_without_writes(&mut admin, &mut con, text, &module_noperm("{lim1}:value"));
    }
    // Not granted at all: the server refuses it by command, before the module runs.
    let err = error_of(&mut con, "RATELIMIT.EXPIRE lim1 1000");
    assert!(err.starts_with("NOPERM"), "{err}");
    assert!(!err.contains("limiter key"), "{err}");
}

#[test]
fn a_per_client_state_is_checked_key_by_key() {
    let server = Server::start();
    let mut admin = setup(&server);
    // alice's two keys, not bob's, and not the OVERALL ones.
    set_user(&mut admin, "u", "+@all ~lim* ~{lim2}:*:alice");
    let mut con = login(&server, "u");
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE lim2 CLIENT alice").unwrap(),
        None
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE lim2 CLIENT alice").unwrap(),
        3
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.RELEASE lim2 1 CLIENT alice").unwrap(),
        1
    );
    for text in [
        "RATELIMIT.TRYACQUIRE lim2 CLIENT bob",
        "RATELIMIT.ACQUIRE lim2 1 TIMEOUT 10 CLIENT bob",
        "RATELIMIT.AVAILABLE lim2 CLIENT bob",
        "RATELIMIT.RELEASE lim2 1 CLIENT bob",
        "RATELIMIT.CANCEL lim2 t CLIENT bob",
    ] {
        refused_without_writes(
            &mut admin,
            &mut con,
            text,
            &module_noperm("{lim2}:value:bob"),
        );
    }
    // DELETE, EXPIRE, PERSIST and SETRATE also act on the OVERALL keys, which u may not touch.
    for text in [
        "RATELIMIT.DELETE lim2 CLIENT alice",
        "RATELIMIT.EXPIRE lim2 100000 CLIENT alice",
        "RATELIMIT.PERSIST lim2 CLIENT alice",
        "RATELIMIT.SETRATE lim2 5 1000 PER_CLIENT CLIENT alice",
    ] {
        refused_without_writes(&mut admin, &mut con, text, &module_noperm("{lim2}:value"));
    }
}

#[test]
fn write_access_is_checked_on_each_derived_key() {
    let server = Server::start();
    let mut admin = setup(&server);
    // The value key may be written, the log only read: the module must refuse before writing
    // the value it is allowed to write.
    set_user(
        &mut admin,
        "u",
        "+@all ~lim* ~{lim1}:value %R~{lim1}:permits",
    );
    let mut con = login(&server, "u");
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE lim1").unwrap(),
        3
    );
    for text in [
        "RATELIMIT.TRYACQUIRE lim1",
        "RATELIMIT.TRYACQUIRE lim1 5",
        "RATELIMIT.SETRATE lim1 10 1000",
        "RATELIMIT.SETRATE lim1 10 1000 KEEPSTATE",
        "RATELIMIT.RELEASE lim1 2",
        "RATELIMIT.ACQUIRE lim1 1 TIMEOUT 10",
        "RATELIMIT.DELETE lim1",
        "RATELIMIT.EXPIRE lim1 100000",
        "RATELIMIT.PERSIST lim1",
    ] {
        refused_without_writes(&mut admin, &mut con, text, &module_noperm("{lim1}:permits"));
    }
}

#[test]
fn derived_keys_readable_but_not_writable_allow_only_the_readers() {
    let server = Server::start();
    let mut admin = setup(&server);
    set_user(&mut admin, "u", "+@all ~lim* %R~{lim*");
    let mut con = login(&server, "u");
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE lim1").unwrap(),
        3
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE lim2 CLIENT alice").unwrap(),
        4
    );
    refused_without_writes(
        &mut admin,
        &mut con,
        "RATELIMIT.TRYACQUIRE lim1",
        &module_noperm("{lim1}:value"),
    );
    refused_without_writes(
        &mut admin,
        &mut con,
        "RATELIMIT.RELEASE lim2 1 CLIENT alice",
        &module_noperm("{lim2}:value:alice"),
    );
}

#[test]
fn a_user_allowed_both_patterns_can_use_every_command() {
    let server = Server::start();
    let mut admin = setup(&server);
    set_user(&mut admin, "u", "+@all ~lim* ~{lim*");
    let mut con = login(&server, "u");
    assert_eq!(try_acquire(&mut con, "lim1", 1), None);
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE lim1").unwrap(),
        2
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.RELEASE lim1 1").unwrap(),
        1
    );
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.ACQUIRE lim1 3 TIMEOUT 10").unwrap(),
        None
    );
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE lim1").unwrap(),
        Some(1000)
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE lim1 10 1000 KEEPSTATE").unwrap(),
        1
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE lim1").unwrap(),
        5
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.EXPIRE lim1 100000").unwrap(),
        1
    );
    let ttl: i64 = line(&mut admin, "PTTL {lim1}:permits").unwrap();
    assert!(ttl > 0 && ttl <= 100_000, "{ttl}");
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.PERSIST lim1").unwrap(), 1);
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE lim2 CLIENT alice").unwrap(),
        None
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.DELETE lim2 CLIENT alice").unwrap(),
        3
    );
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.DELETE lim1").unwrap(), 3);
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE lim3 1 1000").unwrap(),
        1
    );
    assert_eq!(try_acquire(&mut con, "lim3", 1), None);
    assert!(snapshot(&mut admin)
        .iter()
        .all(|(key, _, _)| key.starts_with(b"lim3") || key.starts_with(b"{lim3}")));
}

#[test]
fn read_only_key_permissions_allow_config_and_available_only() {
    let server = Server::start();
    let mut admin = setup(&server);
    set_user(&mut admin, "ro", "+@all %R~*");
    let mut con = login(&server, "ro");
    let config: Vec<Value> = line(&mut con, "RATELIMIT.CONFIG lim1").unwrap();
    assert_eq!(config.len(), 8);
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE lim1").unwrap(),
        3
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE lim2 CLIENT alice").unwrap(),
        4
    );
    // Writers declare their key RW: the server refuses them before the module runs.
    for text in [
        "RATELIMIT.TRYACQUIRE lim1",
        "RATELIMIT.ACQUIRE lim1 1 TIMEOUT 10",
        "RATELIMIT.SETRATE lim1 10 1000",
        "RATELIMIT.RELEASE lim1 1",
        "RATELIMIT.DELETE lim1",
        "RATELIMIT.EXPIRE lim1 1000",
        "RATELIMIT.PERSIST lim1",
    ] {
        let before = snapshot(&mut admin);
        let err = error_of(&mut con, text);
        assert!(err.starts_with("NOPERM"), "`{text}`: {err}");
        assert_eq!(snapshot(&mut admin), before, "`{text}` wrote something");
    }
}

#[test]
fn the_declared_key_is_checked_by_the_server() {
    let server = Server::start();
    let mut admin = setup(&server);
    // May touch the derived keys, not the limiter's own key.
    set_user(&mut admin, "v", "+@all ~{lim*");
    let mut con = login(&server, "v");
    for text in [
        "RATELIMIT.CONFIG lim1",
        "RATELIMIT.AVAILABLE lim1",
        "RATELIMIT.TRYACQUIRE lim1",
        "RATELIMIT.ACQUIRE lim1 1 TIMEOUT 10",
        "RATELIMIT.SETRATE lim1 10 1000",
        "RATELIMIT.SETRATE lim1 10 1000 NX",
        "RATELIMIT.RELEASE lim1 1",
        "RATELIMIT.DELETE lim1",
        "RATELIMIT.EXPIRE lim1 1000",
        "RATELIMIT.PERSIST lim1",
    ] {
        let before = snapshot(&mut admin);
        let err = error_of(&mut con, text);
        assert!(err.starts_with("NOPERM"), "`{text}`: {err}");
        // The server's own message, not the module's.
        assert!(!err.contains("limiter key"), "`{text}`: {err}");
        assert_eq!(snapshot(&mut admin), before, "`{text}` wrote something");
    }
    // The server logged the refusals against the declared key.
    let log: Vec<Value> = line(&mut admin, "ACL LOG").unwrap();
    assert!(!log.is_empty());
}

#[test]
fn scripts_and_transactions_run_with_the_callers_acl() {
    let server = Server::start();
    let mut admin = setup(&server);
    set_user(&mut admin, "u", "+@all ~lim*");
    // One that may not ask ACL WHOAMI either, which the module asks as the script's user.
    set_user(&mut admin, "w", "+@all -acl ~lim*");
    let before = snapshot(&mut admin);
    for user in ["w", "u"] {
        // (`login` asks ACL WHOAMI, which `w` may not.)
        let mut con = server.conn();
        let _: () = redis::cmd("AUTH")
            .arg(user)
            .arg(PASSWORD)
            .query(&mut con)
            .expect("AUTH");
        let err = match redis::cmd("EVAL")
            .arg("return redis.call('RATELIMIT.TRYACQUIRE', KEYS[1])")
            .arg(1)
            .arg("lim1")
            .query::<Value>(&mut con)
        {
            Ok(v) => panic!("a script of {user} bypassed the ACL: {v:?}"),
            Err(e) => error_line(&e),
        };
        assert!(err.contains("NOPERM"), "{user}: {err}");
        assert!(err.contains("{lim1}:value"), "{user}: {err}");
        assert_eq!(snapshot(&mut admin), before);
    }
    let mut con = login(&server, "u");

    let _: () = line(&mut con, "MULTI").unwrap();
    let queued: String = line(&mut con, "RATELIMIT.TRYACQUIRE lim1").unwrap();
    assert_eq!(queued, "QUEUED");
    let exec = format!("{:?}", line::<Value>(&mut con, "EXEC"));
    assert!(exec.contains("NOPERM"), "{exec}");
    assert!(exec.contains("{lim1}:value"), "{exec}");
    assert_eq!(
        snapshot(&mut admin),
        before,
        "MULTI bypassed the ACL: {exec}"
    );
}

#[test]
fn allowall_checks_every_derived_key_of_every_limiter() {
    let server = Server::start();
    let mut admin = setup(&server);
    // lim1 whole, but only lim2's hash: lim2's state is refused by the module.
    set_user(&mut admin, "u", "+@all ~lim1 ~{lim1}:* ~lim2");
    let mut con = login(&server, "u");
    let both = "RATELIMIT.ALLOWALL 2 lim1 lim2 CLIENT alice";
    refused_without_writes(
        &mut admin,
        &mut con,
        both,
        &module_noperm("{lim2}:value:alice"),
    );
    // Without lim2's hash, the server refuses the declared key itself.
    set_user(&mut admin, "v", "+@all ~lim1 ~{lim1}:*");
    let mut con = login(&server, "v");
    let before = snapshot(&mut admin);
    let err = error_of(&mut con, both);
    assert!(err.starts_with("NOPERM"), "{err}");
    assert_eq!(snapshot(&mut admin), before);
    // Allowed every key of both: granted from both.
    set_user(&mut admin, "w", "+@all ~lim* ~{lim*");
    let mut con = login(&server, "w");
    let reply: Vec<Value> = line(&mut con, both).unwrap();
    assert_eq!(reply[1], Value::Int(1), "{reply:?}");
    assert_eq!(get(&mut admin, "{lim2}:value:alice").as_deref(), Some("3"));
    assert_eq!(get(&mut admin, "{lim1}:value").as_deref(), Some("2"));
}

/// The server's version as (major, minor), and whether it is Valkey.
fn server_version(con: &mut Connection) -> ((u32, u32), bool) {
    let valkey = info_field(con, "server", "valkey_version");
    let version = valkey
        .clone()
        .or_else(|| info_field(con, "server", "redis_version"))
        .expect("a version");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    ((major, minor), valkey.is_some())
}

#[test]
fn commands_are_in_their_acl_categories_where_the_server_has_them() {
    let server = Server::start();
    let mut con = server.conn();
    let (version, valkey) = server_version(&mut con);
    // Command categories came with Redis 7.2 (Valkey forked from it), module-defined ones with
    // Redis 7.4 and Valkey 8.
    let categories = valkey || version >= (7, 2);
    let own = valkey || version >= (7, 4);
    // `ACL CAT <category>` skipped module commands (while ACL rules applied their categories)
    // until Redis 8.0 (redis/redis#13489) and Valkey 8.1 (valkey-io/valkey#1140).
    let listed = if valkey {
        version >= (8, 1)
    } else {
        version >= (8, 0)
    };
    let expected = [
        ("ratelimit.setrate", "@write @slow"),
        ("ratelimit.tryacquire", "@write @slow"),
        ("ratelimit.acquire", "@write @slow @blocking"),
        ("ratelimit.allow", "@write @slow"),
        ("ratelimit.allowall", "@write @slow"),
        ("ratelimit.config", "@read @fast"),
        ("ratelimit.available", "@read @slow"),
        ("ratelimit.peek", "@read @slow"),
        ("ratelimit.release", "@write @slow"),
        ("ratelimit.cancel", "@write @slow"),
        ("ratelimit.delete", "@write @slow @keyspace"),
        ("ratelimit.expire", "@write @fast @keyspace"),
        ("ratelimit.persist", "@write @fast @keyspace"),
        ("ratelimit.debug", "@admin @slow @dangerous"),
        ("cl.throttle", "@write @fast"),
        ("gcra", "@write @fast"),
        ("ratelimit.gcraallow", "@write @fast"),
        ("ratelimit.stats", "@read @fast"),
        ("ratelimit.toprefused", "@read @slow"),
    ];
    for (name, usual) in expected {
        let info: Vec<Vec<Value>> = line(&mut con, &format!("COMMAND INFO {name}")).unwrap();
        let got: BTreeSet<String> = match info[0].get(6) {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::SimpleString(s) => s.clone(),
                    Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{name}: {other:?}"),
        };
        let mut want: BTreeSet<String> = if categories {
            usual.split_whitespace().map(str::to_string).collect()
        } else {
            Default::default()
        };
        if own {
            want.insert("@ratelimit".into());
        }
        assert_eq!(got, want, "{name} on {version:?}");
    }
    if listed {
        let registered: BTreeSet<String> =
            line(&mut con, "COMMAND LIST FILTERBY MODULE ratelimit").unwrap();
        let names: BTreeSet<String> = expected.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(
            registered, names,
            "the table above names every registered command"
        );
        let all: Vec<String> = line(&mut con, "ACL CAT ratelimit").unwrap();
        assert_eq!(all.len(), registered.len(), "{all:?} on {version:?}");
        assert_eq!(all.into_iter().collect::<BTreeSet<_>>(), registered);
        // The usual categories list exactly the module commands that carry them.
        for category in [
            "read",
            "write",
            "fast",
            "slow",
            "blocking",
            "keyspace",
            "admin",
            "dangerous",
        ] {
            let tag = format!("@{category}");
            let want: BTreeSet<String> = expected
                .iter()
                .filter(|(_, usual)| usual.split_whitespace().any(|c| c == tag))
                .map(|(n, _)| n.to_string())
                .collect();
            assert!(!want.is_empty(), "{tag} is no command's category");
            let listing: Vec<String> = line(&mut con, &format!("ACL CAT {category}")).unwrap();
            let got: BTreeSet<String> = listing
                .into_iter()
                .filter(|n| n.starts_with("ratelimit.") || n == "cl.throttle" || n == "gcra")
                .collect();
            assert_eq!(got, want, "{tag} on {version:?}");
        }
    }
    if !categories {
        return;
    }
    // The categories work in ACL rules.
    let mut admin = server.conn();
    if own {
        set_user(&mut admin, "limiter", "+@ratelimit +acl|whoami ~*");
        let mut con = login(&server, "limiter");
        let reply: Vec<Value> = line(&mut con, "RATELIMIT.ALLOW cat RATE 1 1000").unwrap();
        assert_eq!(reply[1], Value::Int(1));
        assert!(error_of(&mut con, "GET cat").starts_with("NOPERM"));
    }
    set_user(&mut admin, "reader", "+@all -@write ~*");
    let mut con = login(&server, "reader");
    let _: Value = line(&mut admin, "RATELIMIT.SETRATE cat2 1 1000").unwrap();
    let config: Vec<Value> = line(&mut con, "RATELIMIT.CONFIG cat2").unwrap();
    assert_eq!(config.len(), 8);
    assert!(error_of(&mut con, "RATELIMIT.ALLOW cat2").starts_with("NOPERM"));
}

/// A tiny module, written for this test, whose command `CALLER.TRYACQUIRE key` runs
/// `RATELIMIT.TRYACQUIRE key` through `RedisModule_Call` without the `C` flag (as another
/// module does when it calls a command on its own behalf). The server runs such a call on a
/// temporary client whose ACL user is NULL ("root").
const CALLER_C: &str = r#"
#include <stddef.h>
#include <string.h>
typedef struct Ctx Ctx;
typedef struct Str Str;
typedef struct CallReply CallReply;
typedef int (*Cmd)(Ctx *, Str **, int);
static int (*GetApi)(const char *, void *);
static int (*SetModuleAttribs)(Ctx *, const char *, int, int);
static int (*CreateCommand)(Ctx *, const char *, Cmd, const char *, int, int, int);
static CallReply *(*Call)(Ctx *, const char *, const char *, ...);
static int (*ReplyWithCallReply)(Ctx *, CallReply *);
static void (*FreeCallReply)(CallReply *);
static int (*ReplyWithError)(Ctx *, const char *);
static int WrongArity(Ctx *ctx) { return ReplyWithError(ctx, "ERR wrong number of arguments"); }

static int script(Ctx *ctx, Str **argv, int argc) {
    if (argc != 2) return WrongArity(ctx);
    CallReply *reply = Call(ctx, "EVAL", "ccs", "return redis.call('RATELIMIT.TRYACQUIRE', KEYS[1])", "1", argv[1]);
    if (reply == NULL) return ReplyWithError(ctx, "ERR call failed");
    ReplyWithCallReply(ctx, reply);
    FreeCallReply(reply);
    return 0;
}

static int caller(Ctx *ctx, Str **argv, int argc) {
    if (argc != 2) return WrongArity(ctx);
    CallReply *reply = Call(ctx, "RATELIMIT.TRYACQUIRE", "s", argv[1]);
    if (reply == NULL) return ReplyWithError(ctx, "ERR call failed");
    ReplyWithCallReply(ctx, reply);
    FreeCallReply(reply);
    return 0;
}

int RedisModule_OnLoad(Ctx *ctx, Str **argv, int argc) {
    (void)argv; (void)argc;
    GetApi = (int (*)(const char *, void *))((void **)ctx)[0];
    if (GetApi("RedisModule_SetModuleAttribs", &SetModuleAttribs) ||
        GetApi("RedisModule_CreateCommand", &CreateCommand) ||
        GetApi("RedisModule_Call", &Call) ||
        GetApi("RedisModule_ReplyWithCallReply", &ReplyWithCallReply) ||
        GetApi("RedisModule_FreeCallReply", &FreeCallReply) ||
        GetApi("RedisModule_ReplyWithError", &ReplyWithError))
        return 1;
    SetModuleAttribs(ctx, "caller", 1, 1);
    if (CreateCommand(ctx, "caller.eval", script, "write", 1, 1, 1)) return 1;
    return CreateCommand(ctx, "caller.tryacquire", caller, "write", 1, 1, 1);
}
"#;

/// Builds the calling module with the system C compiler.
fn caller_module() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("acl-caller-module");
    fs::create_dir_all(&dir).expect("module dir");
    let source = dir.join("caller.c");
    let library = dir.join("caller.so");
    fs::write(&source, CALLER_C).expect("write caller.c");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed to build the calling module");
    library
}

/// `ffi::acl::User::current` calls `RedisModule_GetCurrentUserName` on any context ("SAFETY:
/// accepts any context"), but Redis dereferences `ctx->client->user` there without a NULL check,
/// and a client with no user is what the server uses for `RedisModule_Call` from another module
/// (and for timer contexts, and the master link). A module calling RATELIMIT.TRYACQUIRE then
/// crashes Redis 7.0 with a segfault in RM_GetCurrentUserName. (Valkey 8.1 checks for NULL and
/// returns NULL; Redis 8.0.2 survives too.)
///
/// Fails on Redis 7.0.15 (the server dies); passes on Redis 8.0.2 and Valkey 8.1.1.
#[test]
fn another_module_calling_a_command_does_not_take_the_server_down() {
    let caller = caller_module();
    let caller = caller.to_string_lossy().into_owned();
    let mut server = Server::start_with(&["debug-commands", "yes"], &["--loadmodule", &caller]);
    let mut con = server.conn();
    let set: i64 = line(&mut con, "RATELIMIT.SETRATE api 5 1000").unwrap();
    assert_eq!(set, 1);
    // Directly, and from a script the module runs (whose client then has no user either).
    for (command, expected) in [
        ("CALLER.TRYACQUIRE api", Value::Nil),
        ("CALLER.EVAL api", Value::Nil),
    ] {
        match line::<Value>(&mut con, command) {
            Ok(value) => assert_eq!(value, expected, "{command}: granted, as a TRYACQUIRE"),
            Err(e) => {
                let alive = server.is_alive();
                panic!(
                    "{command} lost its connection ({e}; server alive: {alive}):\n{}",
                    server.log()
                );
            }
        }
    }
}
