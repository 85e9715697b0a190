//! Who is being limited: every deciding command counted once (INFO ratelimit's acquired and
//! refused, and per group), the groups' options and bound, CONFIG RESETSTAT, the most-refused
//! names, and nothing of it replicated or written.

use std::collections::BTreeMap;

use redis::{Connection, Value};

use crate::common::waiters::{park, served, spawn, stat, Reply};
use crate::common::*;

/// Group name -> (grants, refusals, near_limit), from `INFO ratelimit`'s `ratelimit_group_*`
/// lines (names as INFO shows them: `api%3Auser`).
fn info_groups(con: &mut Connection) -> BTreeMap<String, (i64, i64, i64)> {
    let info: String = line(con, "INFO ratelimit").unwrap();
    info.lines()
        .filter_map(|l| l.trim().strip_prefix("ratelimit_group_"))
        .map(|l| {
            let (name, fields) = l.split_once(':').expect("name:fields");
            let mut counts = [0; 3];
            for (i, pair) in fields.split(',').enumerate() {
                let (key, value) = pair.split_once('=').expect("k=v");
                assert_eq!(key, ["grants", "refusals", "near_limit"][i], "{l}");
                counts[i] = value.parse().expect("a number");
            }
            (name.to_string(), (counts[0], counts[1], counts[2]))
        })
        .filter(|(name, counts)| name != "_overflow" || *counts != (0, 0, 0))
        .collect()
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// A RESP2 flat array of pairs, or a RESP3 map, as pairs.
fn pairs(v: &Value) -> Vec<(Value, Value)> {
    match v {
        Value::Map(pairs) => pairs.clone(),
        Value::Array(items) => items
            .chunks(2)
            .map(|c| (c[0].clone(), c[1].clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

/// RATELIMIT.STATS's groups: name -> (grants, refusals, near_limit), and the overflow's.
/// (grants, refusals, near_limit).
type Counts = (i64, i64, i64);

fn stats_groups(con: &mut Connection) -> (BTreeMap<String, Counts>, Counts, i64) {
    let reply: Value = line(con, "RATELIMIT.STATS").unwrap();
    let fields = pairs(&reply);
    let names: Vec<String> = fields.iter().map(|(k, _)| text(k)).collect();
    assert_eq!(names, ["stats", "groups", "overflow", "overflow_groups"]);
    let counts = |v: &Value| {
        let p = pairs(v);
        let keys: Vec<String> = p.iter().map(|(k, _)| text(k)).collect();
        assert_eq!(keys, ["grants", "refusals", "near_limit"]);
        (int(&p[0].1), int(&p[1].1), int(&p[2].1))
    };
    let groups = pairs(&fields[1].1)
        .iter()
        .map(|(name, c)| (text(name), counts(c)))
        .collect();
    (groups, counts(&fields[2].1), int(&fields[3].1))
}

fn top_refused(con: &mut Connection, count: usize) -> Vec<(String, i64)> {
    let reply: Value = line(con, &format!("RATELIMIT.TOPREFUSED {count}")).unwrap();
    pairs(&reply)
        .iter()
        .map(|(k, v)| (text(k), int(v)))
        .collect()
}

fn counters(con: &mut Connection) -> (i64, i64, i64) {
    (
        stat(con, "acquired"),
        stat(con, "refused"),
        stat(con, "errors"),
    )
}

/// 2030-01-01: later than the real clock, so GCRA keys' expiries written on the debug clock lie
/// ahead for the server too.
const START: i64 = 1_893_456_000_000;

fn started() -> (Server, Connection) {
    let server = Server::start();
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, START);
    (server, con)
}

#[test]
fn every_deciding_command_counts_once() {
    let (server, mut con) = started();
    line::<i64>(&mut con, "RATELIMIT.SETRATE api:user:1 2 1000").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE api:user:2 1 1000").unwrap();
    let base = counters(&mut con);
    // TRYACQUIRE: a grant (1 of 2 left: near the limit? no, 50%), a grant (0 left: near), a refusal.
    assert_eq!(try_acquire(&mut con, "api:user:1", 1), None);
    assert_eq!(try_acquire(&mut con, "api:user:1", 1), None);
    assert_eq!(try_acquire(&mut con, "api:user:1", 1), Some(1000));
    // ALLOW: a grant then a refusal.
    let _: Value = line(&mut con, "RATELIMIT.ALLOW api:user:2").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.ALLOW api:user:2").unwrap();
    // ALLOWALL, refused by api:user:2: one request, counted once, under the limiter it names.
    let reply: Value = line(&mut con, "RATELIMIT.ALLOWALL 2 api:user:1 api:user:2").unwrap();
    assert!(format!("{reply:?}").contains("api:user:"), "{reply:?}");
    // CL.THROTTLE and GCRA: burst 0, so one grant then a refusal each.
    let _: Value = line(&mut con, "CL.THROTTLE cell:a:1 0 1 60").unwrap();
    let _: Value = line(&mut con, "CL.THROTTLE cell:a:1 0 1 60").unwrap();
    let _: Value = line(&mut con, "GCRA gcra:b:1 0 1 60").unwrap();
    let _: Value = line(&mut con, "GCRA gcra:b:1 0 1 60").unwrap();
    // Errors: counted as errors only.
    error_of(&mut con, "RATELIMIT.TRYACQUIRE api:user:missing");
    error_of(&mut con, "RATELIMIT.ALLOW api:user:1 0");
    error_of(&mut con, "GCRA gcra:b:1 0 0 60");
    let after = counters(&mut con);
    assert_eq!(
        (after.0 - base.0, after.1 - base.1, after.2 - base.2),
        (5, 5, 3),
        "(acquired, refused, errors)"
    );
    let groups = info_groups(&mut con);
    assert_eq!(
        groups,
        BTreeMap::from([
            ("api%3Auser".to_string(), (3, 3, 2)),
            ("cell%3Aa".to_string(), (1, 1, 1)),
            ("gcra%3Ab".to_string(), (1, 1, 1)),
        ])
    );
    let (by_command, overflow, overflowed) = stats_groups(&mut con);
    assert_eq!(
        by_command,
        BTreeMap::from([
            ("api:user".to_string(), (3, 3, 2)),
            ("cell:a".to_string(), (1, 1, 1)),
            ("gcra:b".to_string(), (1, 1, 1)),
        ])
    );
    assert_eq!((overflow, overflowed), ((0, 0, 0), 0));

    // ACQUIRE: at once (a grant), blocked then granted (one grant, when answered), blocked
    // then timed out (one refusal of its group; INFO's refused keeps its meaning: timeouts).
    line::<i64>(&mut con, "RATELIMIT.SETRATE jobs:q:1 1 1000").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.ACQUIRE jobs:q:1").unwrap();
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE jobs:q:1");
    assert_eq!(stats_groups(&mut con).0["jobs:q"], (1, 0, 1));
    advance(&mut con, 1000);
    assert_eq!(served(waiter).reply, Reply::Acquired);
    let timing_out = spawn(&server, "RATELIMIT.ACQUIRE jobs:q:1 TIMEOUT 50");
    let reply = served(timing_out).reply;
    assert!(matches!(reply, Reply::Wait(_)), "{reply:?}");
    assert_eq!(stats_groups(&mut con).0["jobs:q"], (2, 1, 2));
    let end = counters(&mut con);
    assert_eq!((end.0 - after.0, end.1 - after.1), (2, 0));
    assert_eq!(stat(&mut con, "timeouts"), 1);
}

/// A GCRA drop-in's call that asks for no tokens (a peek) or gives them back decides nothing:
/// it is not counted. GCRAALLOW counts like the other two. A waiter ended by CANCEL is answered
/// with the wait hint: a refusal of its group, as when its TIMEOUT runs out.
#[test]
fn peeks_and_give_backs_count_nothing_and_cancelled_waiters_count_as_refused() {
    let (server, mut con) = started();
    let base = counters(&mut con);
    let _: Value = line(&mut con, "CL.THROTTLE cell:p:1 4 1 60 0").unwrap();
    let _: Value = line(&mut con, "CL.THROTTLE cell:p:1 4 1 60 -1").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.GCRAALLOW go:p:1 5 1 60 TOKENS 0").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.GCRAALLOW go:p:1 5 1 60 TOKENS -1").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.GCRAALLOW go:p:1 5 1 60 ATMOST 0").unwrap();
    assert_eq!(counters(&mut con), base, "peeks and give-backs");
    assert!(stats_groups(&mut con).0.is_empty());
    // GCRAALLOW: a burst of 1, so a grant (nothing left: near the limit) then a refusal.
    let _: Value = line(&mut con, "RATELIMIT.GCRAALLOW go:p:1 1 1 60").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.GCRAALLOW go:p:1 1 1 60").unwrap();
    let after = counters(&mut con);
    assert_eq!((after.0 - base.0, after.1 - base.1), (1, 1));
    assert_eq!(stats_groups(&mut con).0["go:p"], (1, 1, 1));

    line::<i64>(&mut con, "RATELIMIT.SETRATE jobs:c:1 1 1000").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.ACQUIRE jobs:c:1").unwrap();
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE jobs:c:1 TICKET t-1");
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.CANCEL jobs:c:1 t-1").unwrap(),
        0
    );
    let reply = served(waiter).reply;
    assert!(matches!(reply, Reply::Wait(_)), "{reply:?}");
    // The first ACQUIRE took the whole rate: a grant near the limit.
    assert_eq!(stats_groups(&mut con).0["jobs:c"], (1, 1, 1));
    let mut top = top_refused(&mut con, 10);
    top.sort();
    assert_eq!(
        top,
        vec![("go:p:1".to_string(), 1), ("jobs:c:1".to_string(), 1)]
    );
}

#[test]
fn transactions_and_scripts_count_what_they_decided() {
    let (_server, mut con) = started();
    line::<i64>(&mut con, "RATELIMIT.SETRATE tx:a:1 1 1000").unwrap();
    let _: Value = redis::pipe()
        .atomic()
        .cmd("RATELIMIT.ACQUIRE")
        .arg("tx:a:1")
        .cmd("RATELIMIT.ACQUIRE")
        .arg("tx:a:1")
        .cmd("RATELIMIT.TRYACQUIRE")
        .arg("tx:a:missing")
        .query(&mut con)
        .unwrap_or(Value::Nil);
    let _: Value = redis::cmd("EVAL")
        .arg("redis.call('GCRA', 'lua:b:1', 0, 1, 60); return redis.pcall('GCRA', 'lua:b:1', 0, 1, 60)")
        .arg(0)
        .query(&mut con)
        .unwrap();
    let (groups, ..) = stats_groups(&mut con);
    assert_eq!(groups["tx:a"], (1, 1, 1));
    assert_eq!(groups["lua:b"], (1, 1, 1));
    assert_eq!(counters(&mut con), (2, 2, 1));
}

#[test]
fn near_limit_is_a_grant_leaving_a_tenth() {
    let (_server, mut con) = started();
    line::<i64>(&mut con, "RATELIMIT.SETRATE near:x:1 20 1000").unwrap();
    // The first 17 grants leave 19..3 (not near); the 18th, 19th and 20th leave 2 (10% of 20),
    // 1 and 0: near.
    for _ in 0..20 {
        assert_eq!(try_acquire(&mut con, "near:x:1", 1), None);
    }
    assert_eq!(try_acquire(&mut con, "near:x:1", 1), Some(1000));
    assert_eq!(stats_groups(&mut con).0["near:x"], (20, 1, 3));
}

#[test]
fn groups_follow_their_options_and_are_bounded() {
    let server = Server::start_with(
        &[
            "debug-commands",
            "yes",
            "group-separator",
            "/",
            "group-depth",
            "1",
        ],
        &[],
    );
    let mut con = server.conn();
    let got: Vec<String> = line(&mut con, "CONFIG GET ratelimit.group-*").unwrap();
    let got: BTreeMap<_, _> = got
        .chunks(2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect();
    assert_eq!(got["ratelimit.group-separator"], "/");
    assert_eq!(got["ratelimit.group-depth"], "1");
    let _: Value = line(&mut con, "GCRA api/user/1 0 1 60").unwrap();
    let _: Value = line(&mut con, "GCRA api:user:1 0 1 60").unwrap();
    let (groups, ..) = stats_groups(&mut con);
    assert_eq!(groups.keys().collect::<Vec<_>>(), ["api", "api:user:1"]);
    // Changing the rule starts the groups afresh under it.
    let _: () = line(
        &mut con,
        "CONFIG SET ratelimit.group-separator : ratelimit.group-depth 2",
    )
    .unwrap();
    assert!(stats_groups(&mut con).0.is_empty());
    for bad in [
        "CONFIG SET ratelimit.group-depth 0",
        "CONFIG SET ratelimit.group-depth 17",
        "CONFIG SET ratelimit.group-separator 123456789",
    ] {
        error_of(&mut con, bad);
    }
    // 300 groups: 256 by name, the rest in the overflow group, about 44 names counted there.
    for i in 0..300 {
        let _: Value = line(&mut con, &format!("GCRA tenant{i}:route:1 0 1 60")).unwrap();
    }
    let (groups, overflow, overflowed) = stats_groups(&mut con);
    assert_eq!(groups.len(), 256);
    assert!(groups.contains_key("tenant0:route") && groups.contains_key("tenant255:route"));
    assert_eq!(overflow, (44, 0, 44));
    assert!((40..=48).contains(&overflowed), "{overflowed}");
    // Off: INFO's acquired still counts, the groups do not.
    let _: () = line(&mut con, "CONFIG SET ratelimit.stats no").unwrap();
    let before = stat(&mut con, "acquired");
    let _: Value = line(&mut con, "GCRA tenant0:route:2 0 1 60").unwrap();
    assert_eq!(stat(&mut con, "acquired"), before + 1);
    assert_eq!(stats_groups(&mut con).0["tenant0:route"], (1, 0, 1));
    assert!(line::<String>(&mut con, "INFO ratelimit")
        .unwrap()
        .contains("ratelimit_counting:0"));
}

#[test]
fn load_options_are_checked() {
    let server = Server::start_plain(&["--enable-module-command", "yes"]);
    let mut con = server.conn();
    let load = |con: &mut Connection, args: &[&str]| {
        let mut with_path = vec![module_path().to_string_lossy().into_owned()];
        with_path.extend(args.iter().map(|s| s.to_string()));
        redis::cmd("MODULE")
            .arg("LOAD")
            .arg(&with_path)
            .query::<Value>(con)
    };
    for args in [
        &["group-depth", "0"][..],
        &["group-depth", "x"],
        &["group-separator", ""],
        &["group-depth"],
        &["stats", "maybe"],
    ] {
        let err = load(&mut con, args).unwrap_err();
        assert!(
            error_line(&err).contains("Error loading"),
            "{args:?}: {err}"
        );
    }
    load(
        &mut con,
        &["stats", "no", "group-separator", "/", "group-depth", "3"],
    )
    .unwrap();
    let got: Vec<String> = line(&mut con, "CONFIG GET ratelimit.*").unwrap();
    let got: BTreeMap<_, _> = got
        .chunks(2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect();
    assert_eq!(
        (
            got["ratelimit.stats"].as_str(),
            got["ratelimit.group-separator"].as_str(),
            got["ratelimit.group-depth"].as_str()
        ),
        ("no", "/", "3")
    );
    let _: Value = line(&mut con, "GCRA a/b/c 0 1 60").unwrap();
    assert!(stats_groups(&mut con).0.is_empty());
}

#[test]
fn config_resetstat_zeroes_the_counters_for_those_allowed_to_run_it() {
    let (_server, mut con) = started();
    let _: Value = line(&mut con, "GCRA r:s:1 0 1 60").unwrap();
    let _: Value = line(&mut con, "GCRA r:s:1 0 1 60").unwrap();
    error_of(&mut con, "GCRA r:s:1 0 0 60");
    // A user who may not run CONFIG sends it: the server refuses, nothing is zeroed.
    let _: () = line(&mut con, "ACL SETUSER viewer on nopass +@all -config ~*").unwrap();
    let mut viewer = _server.conn();
    let _: () = line(&mut viewer, "AUTH viewer x").unwrap();
    let err = error_of(&mut viewer, "CONFIG RESETSTAT");
    assert!(err.starts_with("NOPERM"), "{err}");
    let _: Value = line(&mut viewer, "PING").unwrap();
    assert_eq!(counters(&mut con), (1, 1, 1));
    assert_eq!(top_refused(&mut con, 10), [("r:s:1".to_string(), 1)]);
    let _: () = line(&mut con, "CONFIG RESETSTAT").unwrap();
    assert_eq!(counters(&mut con), (0, 0, 0));
    assert!(stats_groups(&mut con).0.is_empty());
    assert!(top_refused(&mut con, 10).is_empty());
    // Counting goes on from zero.
    let _: Value = line(&mut con, "GCRA r:s:1 0 1 60").unwrap();
    assert_eq!(stats_groups(&mut con).0["r:s"], (0, 1, 0));
}

/// The watch for CONFIG RESETSTAT (a command filter, paid on every command the server runs) is
/// there only while `ratelimit.stats` is yes: turned off, a RESETSTAT leaves the counters; on
/// again (twice, or from a load with `stats no`), it zeroes them.
#[test]
fn config_resetstat_is_watched_only_while_counting() {
    for load in [
        &["debug-commands", "yes"][..],
        &["debug-commands", "yes", "stats", "no"],
    ] {
        let server = Server::start_with(load, &[]);
        let mut con = server.conn();
        let _: Value = line(&mut con, "GCRA r:s:1 0 1 60").unwrap();
        for _ in 0..2 {
            let _: () = line(&mut con, "CONFIG SET ratelimit.stats no").unwrap();
        }
        let _: () = line(&mut con, "CONFIG RESETSTAT").unwrap();
        let _: Value = line(&mut con, "PING").unwrap();
        assert_eq!(counters(&mut con), (1, 0, 0), "{load:?}");
        for _ in 0..2 {
            let _: () = line(&mut con, "CONFIG SET ratelimit.stats yes").unwrap();
        }
        let _: Value = line(&mut con, "GCRA r:s:1 0 1 60").unwrap();
        assert_eq!(counters(&mut con), (1, 1, 0), "{load:?}");
        let _: () = line(&mut con, "CONFIG RESETSTAT").unwrap();
        assert_eq!(counters(&mut con), (0, 0, 0), "{load:?}");
        assert!(top_refused(&mut con, 10).is_empty());
    }
}

#[test]
fn the_most_refused_names_most_first_over_the_last_minutes() {
    let (_server, mut con) = started();
    // user:k refused k times (k = 1..8), one grant each first.
    for k in 1..=8 {
        for _ in 0..=k {
            let _: Value = line(&mut con, &format!("GCRA user:{k} 0 1 600")).unwrap();
        }
    }
    let top = top_refused(&mut con, 3);
    assert_eq!(
        top,
        [
            ("user:8".to_string(), 8),
            ("user:7".to_string(), 7),
            ("user:6".to_string(), 6)
        ]
    );
    assert_eq!(top_refused(&mut con, 100).len(), 8);
    let mut resp3 = _server.conn_resp3();
    let reply: Value = line(&mut resp3, "RATELIMIT.TOPREFUSED 1").unwrap();
    assert!(matches!(reply, Value::Map(_)), "{reply:?}");
    error_of(&mut con, "RATELIMIT.TOPREFUSED 0");
    error_of(&mut con, "RATELIMIT.TOPREFUSED 1 2");
    // Two minutes on, the window has moved past them.
    advance(&mut con, 120_000);
    assert!(top_refused(&mut con, 10).is_empty());
}

/// Nothing counted reaches a replica, the AOF or the keyspace: the same commands on a server
/// counting and on one not counting leave identical datasets and AOF files, and the replica
/// counts nothing.
#[test]
fn nothing_counted_is_replicated_or_written() {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let on = Server::start_with(&["debug-commands", "yes"], &aof);
    let off = Server::start_with(&["debug-commands", "yes", "stats", "no"], &aof);
    let replica = Server::start_replica(&on, true);
    let mut replica_con = replica.conn();
    let mut datasets = Vec::new();
    for server in [&on, &off] {
        let mut con = server.conn();
        set_clock(&mut con, START);
        line::<i64>(&mut con, "RATELIMIT.SETRATE rep:a:1 1 1000").unwrap();
        assert_eq!(try_acquire(&mut con, "rep:a:1", 1), None);
        assert_eq!(try_acquire(&mut con, "rep:a:1", 1), Some(1000));
        let _: Value = line(&mut con, "GCRA rep:b:1 0 1 60").unwrap();
        let _: Value = line(&mut con, "GCRA rep:b:1 0 1 60").unwrap();
        // Member ids are random: the keys, their types and TTLs are compared.
        let keys: Vec<(Vec<u8>, i64)> = snapshot(&mut con)
            .into_iter()
            .map(|(key, _, ttl)| (key, ttl))
            .collect();
        datasets.push(keys);
    }
    assert_eq!(datasets[0], datasets[1]);
    assert_eq!(stats_groups(&mut on.conn()).0.len(), 2);
    let deadline = std::time::Instant::now() + HANG;
    loop {
        let replicated: Vec<(Vec<u8>, i64)> = snapshot(&mut replica_con)
            .into_iter()
            .map(|(key, _, ttl)| (key, ttl))
            .collect();
        if replicated == datasets[0] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "replica: {replicated:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(stats_groups(&mut replica_con).0.is_empty());
    assert_eq!(counters(&mut replica_con), (0, 0, 0));
    assert!(top_refused(&mut replica_con, 10).is_empty());
    let aof_bytes = |d: &std::path::Path| -> Vec<u8> {
        let mut files: Vec<_> = walk(d);
        files.sort();
        files
            .iter()
            .filter(|f| {
                f.to_string_lossy().contains(".aof") && !f.to_string_lossy().ends_with(".manifest")
            })
            .flat_map(|f| std::fs::read(f).unwrap())
            .collect()
    };
    let (a, b) = (aof_bytes(&on.dir), aof_bytes(&off.dir));
    assert!(!a.is_empty());
    assert_eq!(a.len(), b.len(), "AOF of the counting server differs");
}

fn walk(d: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(d).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_configuration_file_and_loadex_set_the_rule() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("observe-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ratelimit.conf");
    std::fs::write(
        &file,
        format!(
            "loadmodule {}\nratelimit.group-separator /\nratelimit.group-depth 3\nratelimit.stats no\n",
            module_path().display()
        ),
    )
    .unwrap();
    let server = Server::start_plain(&[
        "--include",
        file.to_str().unwrap(),
        "--enable-module-command",
        "yes",
    ]);
    let mut con = server.conn();
    let got: Vec<String> = line(&mut con, "CONFIG GET ratelimit.*").unwrap();
    let got: BTreeMap<_, _> = got
        .chunks(2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect();
    assert_eq!(
        (
            got["ratelimit.group-separator"].as_str(),
            got["ratelimit.group-depth"].as_str(),
            got["ratelimit.stats"].as_str()
        ),
        ("/", "3", "no")
    );
    let _: String = line(&mut con, "MODULE UNLOAD ratelimit").unwrap();
    let module = module_path();
    let loaded: String = line(
        &mut con,
        &format!(
            "MODULE LOADEX {} CONFIG ratelimit.group-depth 1 CONFIG ratelimit.group-separator .",
            module.display()
        ),
    )
    .unwrap();
    assert_eq!(loaded, "OK");
    let _: Value = line(&mut con, "GCRA a.b.c 5 1 60").unwrap();
    assert_eq!(stats_groups(&mut con).0.keys().collect::<Vec<_>>(), ["a"]);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
