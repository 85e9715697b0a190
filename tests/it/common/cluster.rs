//! A real 3-master Redis Cluster (no replicas) with the module on every node, made by
//! `redis-cli --cluster create`, with a direct connection to each node and the slot map they
//! agree on.

use std::collections::BTreeSet;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::{line, run, set_clock, snapshot, Connection, Server, Value, HANG, T0};

/// One node's keys with their DUMP and PEXPIRETIME (`common::snapshot`).
pub type Dataset = Vec<(Vec<u8>, Vec<u8>, i64)>;

/// Three cluster nodes, each with a direct connection, and the slot map.
pub struct Cluster {
    pub nodes: Vec<Server>,
    pub conns: Vec<Connection>,
    /// `(first slot, last slot, index into nodes)`.
    pub slots: Vec<(i64, i64, usize)>,
}

/// A connection to one node that never waits more than 10 s for a reply.
pub fn connect(server: &Server) -> Connection {
    let con = server.conn();
    con.set_read_timeout(Some(HANG)).expect("read timeout");
    con
}

impl Cluster {
    /// The cluster with every node's module clock frozen at [`T0`].
    pub fn start() -> Cluster {
        let mut cluster = Cluster::start_on_real_clock();
        for con in &mut cluster.conns {
            set_clock(con, T0);
        }
        cluster
    }

    /// The cluster on the real clock (debug commands on, the clock not frozen): for clients
    /// that cannot drive the debug clock.
    pub fn start_on_real_clock() -> Cluster {
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
        let deadline = Instant::now() + HANG;
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
        cluster
    }

    /// `CLUSTER SLOTS` as seen by node `from`, with owners as node indexes, sorted.
    pub fn slot_map(&mut self, from: usize) -> Vec<(i64, i64, usize)> {
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
    pub fn owner_of_slot(&self, slot: i64) -> usize {
        self.slots
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|s| s.2)
            .expect("every slot is owned")
    }

    pub fn slot(&mut self, key: &[u8]) -> i64 {
        run(&mut self.conns[0], &[b"CLUSTER", b"KEYSLOT", key]).expect("KEYSLOT")
    }

    pub fn owner(&mut self, key: &[u8]) -> usize {
        let slot = self.slot(key);
        self.owner_of_slot(slot)
    }

    /// Sends a command (its second word is the key) to the key's owner, following one MOVED.
    pub fn run(&mut self, words: &[&[u8]]) -> redis::RedisResult<Value> {
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

    pub fn line(&mut self, text: &str) -> redis::RedisResult<Value> {
        let words: Vec<&[u8]> = text.split_whitespace().map(str::as_bytes).collect();
        self.run(&words)
    }

    /// Every node's dataset.
    pub fn snapshots(&mut self) -> Vec<Dataset> {
        self.conns.iter_mut().map(snapshot).collect()
    }

    pub fn keys_of(&mut self, node: usize) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = line(&mut self.conns[node], "KEYS *").expect("KEYS");
        keys.sort();
        keys
    }
}
