//! A real 3-master Redis Cluster with the module on every node: the declared key routes each
//! command, derived keys live in the limiter's slot, and a name whose derived keys would land in
//! another slot is refused with CROSSSLOT before anything is written.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// One node's keys with their DUMP and PEXPIRETIME (`common::snapshot`).
type Dataset = Vec<(Vec<u8>, Vec<u8>, i64)>;

/// Three cluster nodes, each with a direct connection, and the slot map.
struct Cluster {
    nodes: Vec<Server>,
    conns: Vec<Connection>,
    /// `(first slot, last slot, index into nodes)`.
    slots: Vec<(i64, i64, usize)>,
}

fn connect(server: &Server) -> Connection {
    let con = server.conn();
    con.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    con
}

impl Cluster {
    fn start() -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                Server::start_with(
                    &["debug-commands", "yes"],
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "5000",
                    ],
                )
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let output = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            output.status.success(),
            "cluster create failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let mut conns: Vec<Connection> = nodes.iter().map(connect).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        for (i, con) in conns.iter_mut().enumerate() {
            loop {
                let info: String = line(con, "CLUSTER INFO").expect("CLUSTER INFO");
                if info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {i} never reached cluster_state:ok:\n{info}\n{}",
                    nodes[i].log()
                );
                thread::sleep(Duration::from_millis(50));
            }
        }
        let mut cluster = Cluster {
            nodes,
            conns,
            slots: Vec::new(),
        };
        cluster.slots = cluster.slot_map(0);
        // Every node must agree on the map before the tests route with it.
        for i in 1..3 {
            loop {
                if cluster.slot_map(i) == cluster.slots {
                    break;
                }
                assert!(Instant::now() < deadline, "nodes disagree on the slot map");
                thread::sleep(Duration::from_millis(50));
                cluster.slots = cluster.slot_map(0);
            }
        }
        let covered: i64 = cluster.slots.iter().map(|(a, b, _)| b - a + 1).sum();
        assert_eq!(covered, 16384);
        let owners: BTreeSet<usize> = cluster.slots.iter().map(|s| s.2).collect();
        assert_eq!(owners.len(), 3, "each master owns slots");
        for con in &mut cluster.conns {
            set_clock(con, T0);
        }
        cluster
    }

    /// `CLUSTER SLOTS` as seen by node `from`, with owners as node indexes, sorted.
    fn slot_map(&mut self, from: usize) -> Vec<(i64, i64, usize)> {
        let reply: Vec<Value> = line(&mut self.conns[from], "CLUSTER SLOTS").expect("SLOTS");
        let mut map: Vec<(i64, i64, usize)> = reply
            .iter()
            .map(|range| {
                let Value::Array(items) = range else {
                    panic!("slot range {range:?}")
                };
                let (Value::Int(first), Value::Int(last), Value::Array(master)) =
                    (&items[0], &items[1], &items[2])
                else {
                    panic!("slot range {range:?}")
                };
                let Value::Int(port) = master[1] else {
                    panic!("master {master:?}")
                };
                let owner = self
                    .nodes
                    .iter()
                    .position(|n| i64::from(n.port) == port)
                    .expect("a known port");
                (*first, *last, owner)
            })
            .collect();
        map.sort();
        map
    }

    /// The node index that owns `slot`.
    fn owner_of_slot(&self, slot: i64) -> usize {
        self.slots
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|s| s.2)
            .expect("every slot is owned")
    }

    fn slot(&mut self, key: &[u8]) -> i64 {
        run(&mut self.conns[0], &[b"CLUSTER", b"KEYSLOT", key]).expect("KEYSLOT")
    }

    fn owner(&mut self, key: &[u8]) -> usize {
        let slot = self.slot(key);
        self.owner_of_slot(slot)
    }

    /// Sends a command (its second word is the key) to the key's owner, following one MOVED.
    fn run(&mut self, words: &[&[u8]]) -> redis::RedisResult<Value> {
        let node = self.owner(words[1]);
        match run::<Value>(&mut self.conns[node], words) {
            Err(e) if e.code() == Some("MOVED") => {
                let detail = e.detail().unwrap_or_default().to_string();
                let port: u16 = detail
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| panic!("MOVED {detail}"));
                let node = self
                    .nodes
                    .iter()
                    .position(|n| n.port == port)
                    .expect("MOVED to a known node");
                run::<Value>(&mut self.conns[node], words)
            }
            other => other,
        }
    }

    fn line(&mut self, text: &str) -> redis::RedisResult<Value> {
        let words: Vec<&[u8]> = text.split_whitespace().map(str::as_bytes).collect();
        self.run(&words)
    }

    /// Every node's dataset.
    fn snapshots(&mut self) -> Vec<Dataset> {
        self.conns.iter_mut().map(snapshot).collect()
    }

    fn keys_of(&mut self, node: usize) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = line(&mut self.conns[node], "KEYS *").expect("KEYS");
        keys.sort();
        keys
    }
}

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
