//! A real 3-master Redis Cluster with the module on every node: the declared key routes each
//! command, derived keys live in the limiter's slot, and a name whose derived keys would land in
//! another slot is refused with CROSSSLOT before anything is written.

use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::cluster::{connect, Cluster, Dataset};
use crate::common::*;

fn int(value: redis::RedisResult<Value>) -> i64 {
    match value {
        Ok(Value::Int(n)) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn is_nil(value: &redis::RedisResult<Value>) -> bool {
    matches!(value, Ok(Value::Nil))
}

#[test]
fn limiters_on_many_slots_work_and_keep_their_keys_in_their_own_slot() {
    let mut cluster = Cluster::start();
    let names: Vec<String> = (0..50).map(|i| format!("lim-{i}")).collect();
    let mut owners = BTreeSet::new();
    for name in &names {
        owners.insert(cluster.owner(name.as_bytes()));
        assert_eq!(
            int(cluster.line(&format!("RATELIMIT.SETRATE {name} 3 1000"))),
            1
        );
        for _ in 0..2 {
            let reply = cluster.line(&format!("RATELIMIT.TRYACQUIRE {name}"));
            assert!(is_nil(&reply), "{name}: {reply:?}");
        }
        assert_eq!(int(cluster.line(&format!("RATELIMIT.AVAILABLE {name}"))), 1);
        assert!(is_nil(
            &cluster.line(&format!("RATELIMIT.ACQUIRE {name} 1 TIMEOUT 10"))
        ));
        assert_eq!(
            int(cluster.line(&format!("RATELIMIT.TRYACQUIRE {name}"))),
            1000
        );
        assert_eq!(int(cluster.line(&format!("RATELIMIT.RELEASE {name} 1"))), 1);
        assert_eq!(
            int(cluster.line(&format!("RATELIMIT.EXPIRE {name} 600000"))),
            1
        );
        let config = cluster
            .line(&format!("RATELIMIT.CONFIG {name}"))
            .expect("CONFIG");
        assert!(
            matches!(&config, Value::Array(a) if a.len() == 8),
            "{config:?}"
        );
    }
    assert_eq!(owners.len(), 3, "the names spread over all three masters");

    // A PER_CLIENT limiter's client keys live with it too.
    assert_eq!(
        int(cluster.line("RATELIMIT.SETRATE lim-pc 2 1000 PER_CLIENT")),
        1
    );
    assert!(is_nil(
        &cluster.line("RATELIMIT.TRYACQUIRE lim-pc CLIENT 6f1c-uuid")
    ));

    // Each node holds only keys of the slots it owns, and every key is where its limiter is.
    let mut total = 0;
    for node in 0..3 {
        let keys = cluster.keys_of(node);
        total += keys.len();
        for key in &keys {
            let slot = cluster.slot(key);
            assert_eq!(
                cluster.owner_of_slot(slot),
                node,
                "{} is on node {node}, which does not own slot {slot}",
                String::from_utf8_lossy(key)
            );
        }
    }
    assert_eq!(total, 50 * 3 + 3);
    for name in names.iter().map(String::as_str).chain(["lim-pc"]) {
        let node = cluster.owner(name.as_bytes());
        let mut expected = vec![
            name.as_bytes().to_vec(),
            format!("{{{name}}}:permits").into_bytes(),
            format!("{{{name}}}:value").into_bytes(),
        ];
        if name == "lim-pc" {
            expected = vec![
                b"lim-pc".to_vec(),
                b"{lim-pc}:permits:6f1c-uuid".to_vec(),
                b"{lim-pc}:value:6f1c-uuid".to_vec(),
            ];
        }
        let here: Vec<Vec<u8>> = cluster
            .keys_of(node)
            .into_iter()
            .filter(|k| k == name.as_bytes() || k.starts_with(format!("{{{name}}}:").as_bytes()))
            .collect();
        assert_eq!(here, expected, "the keys of {name} on node {node}");
    }
}

#[test]
fn a_command_sent_to_the_wrong_node_is_redirected_by_the_server() {
    let mut cluster = Cluster::start();
    assert_eq!(int(cluster.line("RATELIMIT.SETRATE api 3 1000")), 1);
    let slot = cluster.slot(b"api");
    let owner = cluster.owner(b"api");
    let other = (owner + 1) % 3;
    let before = cluster.snapshots();
    for text in [
        "RATELIMIT.TRYACQUIRE api",
        "RATELIMIT.ACQUIRE api 1 TIMEOUT 10",
        "RATELIMIT.SETRATE api 5 1000",
        "RATELIMIT.CONFIG api",
        "RATELIMIT.AVAILABLE api",
        "RATELIMIT.RELEASE api 1",
        "RATELIMIT.CANCEL api t",
        "RATELIMIT.DELETE api",
        "RATELIMIT.EXPIRE api 1000",
        "RATELIMIT.PERSIST api",
    ] {
        let err = error_of(&mut cluster.conns[other], text);
        let port = cluster.nodes[owner].port;
        assert_eq!(err, format!("MOVED {slot} 127.0.0.1:{port}"), "`{text}`");
    }
    assert_eq!(cluster.snapshots(), before);
    // The routing helper follows it.
    let reply = cluster.line("RATELIMIT.TRYACQUIRE api");
    assert!(is_nil(&reply), "{reply:?}");
}

#[test]
fn names_whose_derived_keys_hash_elsewhere_are_refused_with_crossslot() {
    let mut cluster = Cluster::start();
    // Each name's derived keys hash to another slot than the name itself:
    // `a{b:value` has no closing brace, `{}x:value` an empty tag, `a}b` becomes `{a}b}:value`.
    let names = ["a{b", "{}x", "a}b", "x{", "lim{"];
    for name in names {
        let slot = cluster.slot(name.as_bytes());
        let (value, permits) = if name.contains('{') {
            (format!("{name}:value"), format!("{name}:permits"))
        } else {
            (format!("{{{name}}}:value"), format!("{{{name}}}:permits"))
        };
        assert!(
            cluster.slot(value.as_bytes()) != slot || cluster.slot(permits.as_bytes()) != slot,
            "{name}: derived keys share its slot, not a cross-slot example"
        );
        // A limiter hash as Redisson's trySetRate would leave it (that only touches `name`).
        assert_eq!(
            int(cluster.run(&[
                b"HSET",
                name.as_bytes(),
                b"rate",
                b"3",
                b"interval",
                b"1000",
                b"type",
                b"0",
                b"keepAliveTime",
                b"0",
            ])),
            4
        );
    }
    let expected = |name: &str| {
        let core: String = name.chars().filter(|c| !matches!(c, '{' | '}')).collect();
        format!(
            "CROSSSLOT the keys of limiter '{name}' hash to different slots; \
             use a name with a complete, non-empty hash tag, such as '{{{core}}}'"
        )
    };
    let before = cluster.snapshots();
    for name in names {
        for command in [
            vec!["RATELIMIT.TRYACQUIRE", name],
            vec!["RATELIMIT.TRYACQUIRE", name, "2"],
            vec!["RATELIMIT.ACQUIRE", name],
            vec!["RATELIMIT.ACQUIRE", name, "1", "TIMEOUT", "10"],
            vec!["RATELIMIT.AVAILABLE", name],
            vec!["RATELIMIT.RELEASE", name, "1"],
            vec!["RATELIMIT.CANCEL", name, "t"],
            vec!["RATELIMIT.SETRATE", name, "5", "1000"],
            vec!["RATELIMIT.SETRATE", name, "5", "1000", "XX"],
            vec!["RATELIMIT.SETRATE", name, "5", "1000", "NX"],
            vec!["RATELIMIT.SETRATE", name, "5", "1000", "KEEPSTATE"],
            vec!["RATELIMIT.SETRATE", name, "5", "1000", "PER_CLIENT"],
            vec!["RATELIMIT.DELETE", name],
            vec!["RATELIMIT.DELETE", name, "CLIENT", "c"],
            vec!["RATELIMIT.EXPIRE", name, "100000"],
            vec!["RATELIMIT.PERSIST", name],
        ] {
            let words: Vec<&[u8]> = command.iter().map(|w| w.as_bytes()).collect();
            let err = match cluster.run(&words) {
                Ok(v) => panic!("{command:?} succeeded with {v:?}"),
                Err(e) => error_line(&e),
            };
            assert_eq!(err, expected(name), "{command:?}");
        }
    }
    assert_eq!(
        cluster.snapshots(),
        before,
        "a refused command wrote something"
    );
    // CONFIG reads only the declared key.
    for name in names {
        let config = cluster.run(&[b"RATELIMIT.CONFIG", name.as_bytes()]);
        assert!(
            matches!(&config, Ok(Value::Array(a)) if a.len() == 8),
            "{config:?}"
        );
    }
    // The suggested name works.
    let tagged = "{ab}";
    assert_eq!(
        int(cluster.run(&[b"RATELIMIT.SETRATE", tagged.as_bytes(), b"1", b"1000"])),
        1
    );
    assert!(is_nil(
        &cluster.run(&[b"RATELIMIT.TRYACQUIRE", tagged.as_bytes()])
    ));
    let node = cluster.owner(tagged.as_bytes());
    let exists: i64 = line(
        &mut cluster.conns[node],
        "EXISTS {ab} {ab}:value {ab}:permits",
    )
    .unwrap();
    assert_eq!(exists, 3);
    for (i, node) in cluster.nodes.iter_mut().enumerate() {
        assert!(node.is_alive(), "node {i} died:\n{}", node.log());
    }
}

#[test]
fn command_getkeys_returns_the_limiter_key_in_cluster_mode() {
    let mut cluster = Cluster::start();
    for text in [
        "COMMAND GETKEYS RATELIMIT.SETRATE lim 1 1000 PER_CLIENT CLIENT c",
        "COMMAND GETKEYS RATELIMIT.TRYACQUIRE lim 2 CLIENT c",
        "COMMAND GETKEYS RATELIMIT.ACQUIRE lim 2 TIMEOUT 5",
        "COMMAND GETKEYS RATELIMIT.CONFIG lim",
        "COMMAND GETKEYS RATELIMIT.AVAILABLE lim CLIENT c",
        "COMMAND GETKEYS RATELIMIT.RELEASE lim 1",
        "COMMAND GETKEYS RATELIMIT.DELETE lim",
        "COMMAND GETKEYS RATELIMIT.EXPIRE lim 10 NX",
        "COMMAND GETKEYS RATELIMIT.PERSIST lim",
    ] {
        for con in &mut cluster.conns {
            let keys: Vec<String> = line(con, text).expect(text);
            assert_eq!(keys, vec!["lim".to_string()], "`{text}`");
        }
    }
}

/// A limiter moved by a live resharding, and the order its keys are migrated in.
struct Resharded {
    name: String,
    /// The client of a PER_CLIENT limiter, whose own state keys move.
    client: Option<&'static str>,
    /// `[hash, value, permits]`.
    keys: [String; 3],
    /// Indexes into `keys`, in MIGRATE order.
    order: [usize; 3],
    slot: i64,
}

impl Resharded {
    fn new(name: String, client: Option<&'static str>, order: [usize; 3], slot: i64) -> Self {
        let suffix = client.map(|c| format!(":{c}")).unwrap_or_default();
        let keys = [
            name.clone(),
            format!("{{{name}}}:value{suffix}"),
            format!("{{{name}}}:permits{suffix}"),
        ];
        Resharded {
            name,
            client,
            keys,
            order,
            slot,
        }
    }

    /// `RATELIMIT.<command> <name> <args>`, with `CLIENT <id>` for a PER_CLIENT limiter.
    fn command(&self, command: &str, args: &str) -> String {
        let client = self
            .client
            .map(|c| format!(" CLIENT {c}"))
            .unwrap_or_default();
        format!("RATELIMIT.{command} {} {args}{client}", self.name)
    }
}

fn node_id(con: &mut Connection) -> String {
    line(con, "CLUSTER MYID").expect("CLUSTER MYID")
}

/// Sends `text` on `con`, preceded by ASKING if `asking`; the reply or the error line.
fn attempt(con: &mut Connection, asking: bool, text: &str) -> Result<Value, String> {
    if asking {
        let ok: String = line(con, "ASKING").expect("ASKING");
        assert_eq!(ok, "OK");
    }
    line::<Value>(con, text).map_err(|e| error_line(&e))
}

const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";

/// Every acquisition and every command that opens the derived keys, on the source as a client
/// routed by the slot map sends it and on the target after ASKING, while `moved` of the keys
/// are on the target: never a grant, TRYAGAIN exactly where Redis's own multi-key rule says so
/// (checked against `EXISTS` of the same keys), the ASK redirection where the source no longer
/// has the hash, and nothing written anywhere.
fn check_step(cluster: &mut Cluster, lim: &Resharded, nodes: (usize, usize), moved: [bool; 3]) {
    let (source, target) = nodes;
    let target_port = cluster.nodes[target].port;
    let before = resharding_snapshots(cluster);
    let acquisitions = [
        lim.command("TRYACQUIRE", "5"),
        lim.command("TRYACQUIRE", "1"),
        lim.command("ACQUIRE", "1 TIMEOUT 10"),
    ];
    let others = [
        lim.command("AVAILABLE", ""),
        lim.command("RELEASE", "1"),
        lim.command("SETRATE", "5 60000 KEEPSTATE"),
        lim.command("SETRATE", "5 60000"),
        lim.command("DELETE", ""),
        lim.command("EXPIRE", "100000"),
        lim.command("PERSIST", ""),
    ];
    let exists = format!("EXISTS {}", lim.keys.join(" "));
    for (node, asking) in [(source, false), (target, true)] {
        let here: Vec<bool> = moved.iter().map(|&m| m == (node == target)).collect();
        let all_here = here.iter().all(|&h| h);
        let expected_error = if node == source && !here[0] {
            Some(format!("ASK {} 127.0.0.1:{target_port}", lim.slot))
        } else if all_here {
            None
        } else {
            Some(TRYAGAIN.to_string())
        };
        let context = format!("node {node} (asking {asking}) with {moved:?} moved");
        // Redis's own answer to a command declaring all the keys. It differs from the module's
        // only where the source has state keys but not the hash: the server sends the module's
        // command, routed by the hash alone, to the target, which answers TRYAGAIN.
        let redis_says = attempt(&mut cluster.conns[node], asking, &exists);
        let redis_expected = if all_here {
            Ok(Value::Int(3))
        } else if node == source && here.iter().all(|&h| !h) {
            Err(format!("ASK {} 127.0.0.1:{target_port}", lim.slot))
        } else {
            Err(TRYAGAIN.to_string())
        };
        assert_eq!(redis_says, redis_expected, "{exists} on {context}");
        for text in &acquisitions {
            let reply = attempt(&mut cluster.conns[node], asking, text);
            match &expected_error {
                Some(error) => assert_eq!(reply.as_ref(), Err(error), "`{text}` on {context}"),
                // Served: the limiter is spent, so a wait, never a grant (nil).
                None => assert!(
                    matches!(reply, Ok(Value::Int(ms)) if ms > 0),
                    "`{text}` on {context}: {reply:?}"
                ),
            }
        }
        // The other commands would legitimately write where the limiter is whole.
        if let Some(error) = &expected_error {
            for text in &others {
                let reply = attempt(&mut cluster.conns[node], asking, text);
                assert_eq!(reply.as_ref(), Err(error), "`{text}` on {context}");
            }
        } else {
            let available = attempt(&mut cluster.conns[node], asking, &others[0]);
            assert_eq!(available, Ok(Value::Int(0)), "{context}");
        }
    }
    assert_eq!(
        resharding_snapshots(cluster),
        before,
        "something was written with {moved:?} moved"
    );
}

/// Every node's keys with their DUMP and PEXPIRETIME, read under ASKING so that the keys an
/// IMPORTING node already holds are readable.
fn resharding_snapshots(cluster: &mut Cluster) -> Vec<Dataset> {
    cluster
        .conns
        .iter_mut()
        .map(|con| {
            let mut keys: Vec<Vec<u8>> = line(con, "KEYS *").expect("KEYS");
            keys.sort();
            keys.into_iter()
                .map(|key| {
                    let mut asking = |command: &[u8]| {
                        let ok: String = line(con, "ASKING").expect("ASKING");
                        assert_eq!(ok, "OK");
                        run::<Value>(con, &[command, &key]).expect("read under ASKING")
                    };
                    let Value::BulkString(dump) = asking(b"DUMP") else {
                        panic!("no DUMP")
                    };
                    let Value::Int(at) = asking(b"PEXPIRETIME") else {
                        panic!("no PEXPIRETIME")
                    };
                    (key, dump, at)
                })
                .collect()
        })
        .collect()
}

/// A client blocked in ACQUIRE on its own connection; its reply comes back through `done`.
fn block_acquire(
    server: &Server,
    text: String,
) -> std::sync::mpsc::Receiver<Result<Value, String>> {
    let mut con = connect(server);
    let (done, reply) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let result = line::<Value>(&mut con, &text).map_err(|e| error_line(&e));
        let _ = done.send(result);
    });
    reply
}

fn blocked_clients(con: &mut Connection) -> i64 {
    let info: String = line(con, "INFO clients").expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("blocked_clients in INFO clients")
}

fn wait_for_blocked(con: &mut Connection, n: i64) {
    let deadline = Instant::now() + HANG;
    while blocked_clients(con) != n {
        assert!(Instant::now() < deadline, "never {n} blocked clients");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_limiter_split_by_a_live_resharding_gets_tryagain_and_is_never_granted_twice() {
    let mut cluster = Cluster::start();
    let (source, target, third) = (0, 1, 2);
    // Hash first, state first, and the hash in the middle; the last for a PER_CLIENT state.
    let plans: [(Option<&'static str>, [usize; 3]); 4] = [
        (None, [0, 1, 2]),
        (None, [1, 2, 0]),
        (None, [2, 0, 1]),
        (Some("c1"), [1, 0, 2]),
    ];
    let mut limiters = Vec::new();
    let mut slots = BTreeSet::new();
    for i in 0.. {
        if limiters.len() == plans.len() {
            break;
        }
        let name = format!("reshard-{i}");
        let slot = cluster.slot(name.as_bytes());
        if cluster.owner_of_slot(slot) == source && slots.insert(slot) {
            let (client, order) = plans[limiters.len()];
            limiters.push(Resharded::new(name, client, order, slot));
        }
    }
    let ids: Vec<String> = cluster.conns.iter_mut().map(node_id).collect();
    let target_port = cluster.nodes[target].port;

    for lim in &limiters {
        let mode = if lim.client.is_some() {
            " PER_CLIENT"
        } else {
            ""
        };
        let created = line::<i64>(
            &mut cluster.conns[source],
            &format!("RATELIMIT.SETRATE {} 5 60000{mode}", lim.name),
        );
        assert_eq!(created, Ok(1));
        // Spend the rate.
        let granted = attempt(
            &mut cluster.conns[source],
            false,
            &lim.command("TRYACQUIRE", "5"),
        );
        assert_eq!(granted, Ok(Value::Nil));
        let originals: Vec<Option<Vec<u8>>> = lim
            .keys
            .iter()
            .map(|k| dump(&mut cluster.conns[source], k))
            .collect();
        assert!(originals.iter().all(Option::is_some), "{originals:?}");

        let slot = lim.slot.to_string();
        let importing = format!("CLUSTER SETSLOT {slot} IMPORTING {}", ids[source]);
        let migrating = format!("CLUSTER SETSLOT {slot} MIGRATING {}", ids[target]);
        assert_eq!(
            line::<String>(&mut cluster.conns[target], &importing),
            Ok("OK".into())
        );
        assert_eq!(
            line::<String>(&mut cluster.conns[source], &migrating),
            Ok("OK".into())
        );

        // A client already waiting on the source: no client is there to route its grant.
        let waiter = block_acquire(&cluster.nodes[source], lim.command("ACQUIRE", "1"));
        wait_for_blocked(&mut cluster.conns[source], 1);

        let mut moved = [false; 3];
        check_step(&mut cluster, lim, (source, target), moved);
        for (step, &index) in lim.order.iter().enumerate() {
            let migrate = format!("MIGRATE 127.0.0.1 {target_port} {} 0 5000", lim.keys[index]);
            assert_eq!(
                line::<String>(&mut cluster.conns[source], &migrate),
                Ok("OK".into()),
                "{migrate}"
            );
            moved[index] = true;
            if step == 0 {
                // The MIGRATE deleted a watched key on the source, which serves the queue.
                let served = waiter
                    .recv_timeout(HANG)
                    .expect("the waiter is answered once its limiter is split");
                assert_eq!(served, Err(TRYAGAIN.to_string()), "{}", lim.name);
                wait_for_blocked(&mut cluster.conns[source], 0);
            }
            check_step(&mut cluster, lim, (source, target), moved);
        }

        // Finish as `redis-cli --cluster reshard` does: every node learns the new owner.
        for node in [target, source, third] {
            let assign = format!("CLUSTER SETSLOT {slot} NODE {}", ids[target]);
            assert_eq!(
                line::<String>(&mut cluster.conns[node], &assign),
                Ok("OK".into())
            );
        }
        // The target serves the limiter with its state intact: still spent.
        let left_behind = cluster.keys_of(source);
        for (key, original) in lim.keys.iter().zip(&originals) {
            assert_eq!(&dump(&mut cluster.conns[target], key), original, "{key}");
            assert!(!left_behind.contains(&key.as_bytes().to_vec()), "{key}");
        }
        for permits in ["5", "1"] {
            let reply = attempt(
                &mut cluster.conns[target],
                false,
                &lim.command("TRYACQUIRE", permits),
            );
            assert!(matches!(reply, Ok(Value::Int(ms)) if ms > 0), "{reply:?}");
        }
        assert_eq!(
            attempt(
                &mut cluster.conns[target],
                false,
                &lim.command("AVAILABLE", "")
            ),
            Ok(Value::Int(0))
        );
        let moved_error = attempt(
            &mut cluster.conns[source],
            false,
            &lim.command("TRYACQUIRE", "1"),
        );
        assert_eq!(
            moved_error,
            Err(format!("MOVED {slot} 127.0.0.1:{target_port}"))
        );
    }
    for (i, node) in cluster.nodes.iter_mut().enumerate() {
        assert!(node.is_alive(), "node {i} died:\n{}", node.log());
    }
}

#[test]
fn allowall_across_slots_is_refused_by_the_server_and_works_with_a_hash_tag() {
    let mut cluster = Cluster::start();
    let (a, b) = ("second", "day");
    assert_ne!(cluster.slot(a.as_bytes()), cluster.slot(b.as_bytes()));
    for name in [a, b] {
        int(cluster.line(&format!("RATELIMIT.SETRATE {name} 5 1000")));
    }
    let before = cluster.snapshots();
    for node in 0..cluster.conns.len() {
        let err = line::<Value>(
            &mut cluster.conns[node],
            &format!("RATELIMIT.ALLOWALL 2 {a} {b}"),
        )
        .expect_err("keys in two slots");
        assert_eq!(err.code(), Some("CROSSSLOT"), "node {node}: {err}");
    }
    assert_eq!(
        cluster.snapshots(),
        before,
        "a refused call wrote something"
    );
    // With one hash tag both limiters live on one node, which serves the call.
    let owner = cluster.owner(b"{u}:second");
    assert_eq!(owner, cluster.owner(b"{u}:day"));
    let both = "RATELIMIT.ALLOWALL 2 {u}:second {u}:day";
    let con = &mut cluster.conns[owner];
    // Created on first use, one permit each.
    let _: Value = line(con, "RATELIMIT.TRYACQUIRE {u}:second RATE 2 1000").unwrap();
    let _: Value = line(con, "RATELIMIT.TRYACQUIRE {u}:day RATE 5 86400000").unwrap();
    let reply: Vec<Value> = line(con, both).unwrap();
    assert_eq!(reply[1], Value::Int(1), "allowed: {reply:?}");
    let reply: Vec<Value> = line(con, both).unwrap();
    assert_eq!(
        reply[1],
        Value::Int(0),
        "the second limit is spent: {reply:?}"
    );
    assert_eq!(reply[11], Value::BulkString(b"{u}:second".to_vec()));
    let other = (owner + 1) % cluster.conns.len();
    let err = line::<Value>(&mut cluster.conns[other], both).expect_err("not the owner");
    assert_eq!(err.code(), Some("MOVED"), "{err}");
    // Every key of every limiter stays in the tag's slot.
    let slot = cluster.slot(b"u");
    for key in cluster.keys_of(owner) {
        if key.starts_with(b"{u}") {
            assert_eq!(cluster.slot(&key), slot);
        }
    }
}
