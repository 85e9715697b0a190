//! An in-memory dataset for the store's unit tests: strings, hashes and zsets with TTLs (and
//! hash fields with TTLs of their own, as HPEXPIREAT sets them), enough to hold Redisson's hash,
//! value and permits zset and a ONEKEY limiter's string. It applies the same [`Effect`]s
//! [`crate::key::Key::apply`] applies to the server, and logs each one that changed something,
//! as the command that would be replicated.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::ControlFlow;

use super::config::FIELD_NAMES;
use super::dataset::{Dataset, OpenKey};
use super::LimiterKeys;
use crate::error::Error;
use crate::key::{Effect, KeyType, OpenMode, StaticString, Writable};
use crate::sliding_log::{Config, Order, Span};

/// A value as the server would hold it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// Members in the server's order: by score, then by member.
    ZSet(Vec<(f64, Vec<u8>)>),
    /// A type the module never reads (a list, say).
    Other,
}

#[derive(Debug, Clone)]
struct Stored {
    value: Value,
    expires_at: Option<i64>,
    /// A hash's fields with a TTL of their own, by field: the absolute expiry in unix ms.
    field_expiries: BTreeMap<Vec<u8>, i64>,
}

impl Stored {
    fn new(value: Value, expires_at: Option<i64>) -> Self {
        Stored {
            value,
            expires_at,
            field_expiries: BTreeMap::new(),
        }
    }

    /// Drops the hash fields whose expiry has come, as the server does when it finds them.
    fn expire_fields(&mut self, now: i64) {
        let Value::Hash(hash) = &mut self.value else {
            return;
        };
        self.field_expiries.retain(|field, at| {
            let live = *at > now;
            if !live {
                hash.remove(field);
            }
            live
        });
    }
}

/// The dataset: keys by name, the server's clock, and the writes made.
#[derive(Default)]
pub struct Memory {
    keys: RefCell<BTreeMap<Vec<u8>, Stored>>,
    now: Cell<i64>,
    writes: RefCell<Vec<String>>,
}

impl Memory {
    pub fn at(now: i64) -> Self {
        let memory = Memory::default();
        memory.now.set(now);
        memory
    }

    /// Moves the server's clock (keys whose expiry has come are gone from then on).
    pub fn set_now(&self, now: i64) {
        self.now.set(now);
    }

    /// Puts a value as a client would, without a TTL.
    pub fn put(&self, name: &[u8], value: Value) {
        self.keys
            .borrow_mut()
            .insert(name.to_vec(), Stored::new(value, None));
    }

    /// Gives a live hash's `field` a TTL of its own, expiring at `at` (HPEXPIREAT); whether the
    /// field is there.
    pub fn expire_field(&self, name: &[u8], field: &[u8], at: i64) -> bool {
        self.write(name, |entry| match entry {
            Some(Stored {
                value: Value::Hash(hash),
                field_expiries,
                ..
            }) if hash.contains_key(field) => {
                field_expiries.insert(field.to_vec(), at);
                true
            }
            _ => false,
        })
    }

    /// The live value of a key, without its expired hash fields (a hash left with none is
    /// gone).
    pub fn get(&self, name: &[u8]) -> Option<Value> {
        let now = self.now.get();
        self.live(name, |stored| {
            let mut stored = stored.clone();
            stored.expire_fields(now);
            stored.value
        })
        .filter(|value| !matches!(value, Value::Hash(hash) if hash.is_empty()))
    }

    /// The absolute expiry of a live key.
    pub fn expiry(&self, name: &[u8]) -> Option<i64> {
        self.live(name, |stored| stored.expires_at).flatten()
    }

    /// The names of the live keys.
    pub fn names(&self) -> Vec<Vec<u8>> {
        let now = self.now.get();
        self.keys
            .borrow()
            .iter()
            .filter(|(_, stored)| stored.expires_at.is_none_or(|at| at > now))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The writes made since last asked, as the commands replicated for them.
    pub fn take_writes(&self) -> Vec<String> {
        self.writes.take()
    }

    /// A limiter of `name` in this dataset, as a command opens it.
    pub fn limiter<'m, M: OpenMode>(
        &'m self,
        name: &'m [u8],
    ) -> Result<LimiterKeys<'m, M, &'m Memory>, Error> {
        LimiterKeys::in_dataset(self, name, self.open(name))
    }

    fn live<R>(&self, name: &[u8], read: impl FnOnce(&Stored) -> R) -> Option<R> {
        let now = self.now.get();
        let keys = self.keys.borrow();
        let stored = keys.get(name)?;
        if stored.expires_at.is_some_and(|at| at <= now) {
            return None;
        }
        Some(read(stored))
    }

    /// Runs `write` on the live key (None if absent), dropping it if `write` leaves it empty.
    fn write<R>(&self, name: &[u8], write: impl FnOnce(&mut Option<Stored>) -> R) -> R {
        let now = self.now.get();
        let mut keys = self.keys.borrow_mut();
        let mut entry = keys
            .remove(name)
            .filter(|stored| stored.expires_at.is_none_or(|at| at > now));
        if let Some(stored) = &mut entry {
            stored.expire_fields(now);
        }
        let result = write(&mut entry);
        if let Some(stored) = entry {
            let empty = match &stored.value {
                Value::Hash(fields) => fields.is_empty(),
                Value::ZSet(members) => members.is_empty(),
                _ => false,
            };
            if !empty {
                keys.insert(name.to_vec(), stored);
            }
        }
        result
    }
}

impl<'m> Dataset for &'m Memory {
    type Key<M: OpenMode> = MemoryKey<'m, M>;

    fn open<M: OpenMode>(&self, name: &[u8]) -> MemoryKey<'m, M> {
        MemoryKey {
            memory: self,
            name: name.to_vec(),
            mode: PhantomData,
        }
    }

    /// Nothing is kept: every request reads the hash.
    fn open_kept_overall<M: OpenMode>(
        &self,
    ) -> Option<(MemoryKey<'m, M>, impl FnOnce() -> MemoryKey<'m, M> + '_)> {
        None::<(_, fn() -> MemoryKey<'m, M>)>
    }

    /// The tests' caller may access every key.
    fn check_access<M: OpenMode>(&self, _: &MemoryKey<'m, M>) -> Result<(), Error> {
        Ok(())
    }

    /// Not a cluster: nothing is ever split.
    fn refuse_split<M: OpenMode>(&self, _: &[u8], _: &[&MemoryKey<'m, M>]) -> Result<(), Error> {
        Ok(())
    }

    fn kept_config(&self, _: usize) -> Option<Config> {
        None
    }

    fn keep_config(&self, _: &[u8], _: usize, _: Config, _: impl FnOnce() -> bool) {}

    /// As the server's HPTTL answers: each field found is there, without a TTL of its own.
    fn without_field_ttls<M: OpenMode>(&self, hash: &MemoryKey<'m, M>, present: u8) -> bool {
        self.live(&hash.name, |stored| {
            let Value::Hash(fields) = &stored.value else {
                return false;
            };
            FIELD_NAMES
                .iter()
                .enumerate()
                .filter(|(i, _)| present & (1 << i) != 0)
                .all(|(_, field)| {
                    let field = field.bytes();
                    fields.contains_key(field) && !stored.field_expiries.contains_key(field)
                })
        })
        .unwrap_or(false)
    }

    fn db(&self) -> i32 {
        0
    }

    fn server_ms(&self) -> i64 {
        self.now.get()
    }
}

/// A key of a [`Memory`] dataset.
pub struct MemoryKey<'m, M> {
    memory: &'m Memory,
    name: Vec<u8>,
    mode: PhantomData<M>,
}

impl<M> MemoryKey<'_, M> {
    fn members(&self) -> Vec<(f64, Vec<u8>)> {
        match self.memory.get(&self.name) {
            Some(Value::ZSet(members)) => members,
            _ => Vec::new(),
        }
    }

    fn log(&self, command: String) {
        let name = String::from_utf8_lossy(&self.name);
        self.memory
            .writes
            .borrow_mut()
            .push(command.replacen("{key}", &name, 1));
    }

    /// Writes the zset's members, if the key is one or is absent; whether it changed.
    fn zset(&self, change: impl FnOnce(&mut Vec<(f64, Vec<u8>)>) -> bool) -> bool {
        self.memory.write(&self.name, |entry| match entry {
            Some(Stored {
                value: Value::ZSet(members),
                ..
            }) => change(members),
            Some(_) => false,
            None => {
                let mut members = Vec::new();
                let changed = change(&mut members);
                *entry = Some(Stored::new(Value::ZSet(members), None));
                changed
            }
        })
    }

    fn set_string(&self, bytes: &[u8], at: Option<i64>) {
        self.memory.write(&self.name, |entry| {
            let kept = entry.as_ref().and_then(|stored| stored.expires_at);
            *entry = Some(Stored::new(Value::String(bytes.to_vec()), at.or(kept)));
        });
    }
}

fn in_span(score: f64, span: Span) -> bool {
    match span {
        Span::UpTo(cutoff) => score <= cutoff as f64,
        Span::After(cutoff) => score > cutoff as f64,
        Span::Between(low, high) => score > low as f64 && score <= high as f64,
        Span::Everything => true,
    }
}

/// Inserts a member in the server's order.
fn insert(members: &mut Vec<(f64, Vec<u8>)>, score: f64, member: &[u8]) {
    let at = members
        .iter()
        .position(|(s, m)| (*s, m.as_slice()) > (score, member))
        .unwrap_or(members.len());
    members.insert(at, (score, member.to_vec()));
}

impl<M: OpenMode> OpenKey<M> for MemoryKey<'_, M> {
    type Field = Vec<u8>;

    fn name(&self) -> &[u8] {
        &self.name
    }

    fn key_type(&self) -> KeyType {
        match self.memory.get(&self.name) {
            None => KeyType::Empty,
            Some(Value::String(_)) => KeyType::String,
            Some(Value::Hash(_)) => KeyType::Hash,
            Some(Value::ZSet(_)) => KeyType::ZSet,
            Some(Value::Other) => KeyType::Other,
        }
    }

    fn read_string<R>(&self, read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        match self.memory.get(&self.name) {
            Some(Value::String(bytes)) => Some(read(&bytes)),
            _ => None,
        }
    }

    fn hash_get<const N: usize>(&self, fields: [&StaticString; N]) -> [Option<Vec<u8>>; N] {
        let hash = match self.memory.get(&self.name) {
            Some(Value::Hash(hash)) => hash,
            _ => BTreeMap::new(),
        };
        fields.map(|field| hash.get(field.bytes()).cloned())
    }

    fn hash_len(&self) -> usize {
        match self.memory.get(&self.name) {
            Some(Value::Hash(hash)) => hash.len(),
            _ => 0,
        }
    }

    fn zscan<E>(
        &self,
        span: Span,
        order: Order,
        mut visit: impl FnMut(f64, &[u8]) -> Result<ControlFlow<()>, E>,
    ) -> Result<(), E> {
        let mut members: Vec<_> = self
            .members()
            .into_iter()
            .filter(|(score, _)| in_span(*score, span))
            .collect();
        if order == Order::NewestFirst {
            members.reverse();
        }
        for (score, member) in members {
            if visit(score, &member)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn any_in(&self, span: Span) -> bool {
        self.members()
            .iter()
            .any(|(score, _)| in_span(*score, span))
    }

    fn zcard(&self) -> usize {
        self.members().len()
    }

    fn expires_at(&self) -> Option<i64> {
        self.memory.expiry(&self.name)
    }

    fn apply(&self, effect: Effect<'_>) -> bool
    where
        M: Writable,
    {
        let memory = self.memory;
        let (done, command) = match effect {
            Effect::Set(bytes) => {
                self.set_string(bytes, None);
                let value = String::from_utf8_lossy(bytes);
                (true, format!("SET {{key}} {value} KEEPTTL"))
            }
            Effect::SetExpiringAt { value, at } => {
                self.set_string(value.to_string().as_bytes(), Some(at));
                (true, format!("SET {{key}} {value} PXAT {at}"))
            }
            Effect::SetPacked { value, at } => {
                self.set_string(value, at);
                let command = match at {
                    Some(at) => format!("SET {{key}} <{} bytes> PXAT {at}", value.len()),
                    None => format!("SET {{key}} <{} bytes> KEEPTTL", value.len()),
                };
                (true, command)
            }
            Effect::HSet(fields) => {
                let done = memory.write(&self.name, |entry| {
                    let entry = entry
                        .get_or_insert_with(|| Stored::new(Value::Hash(BTreeMap::new()), None));
                    let Value::Hash(hash) = &mut entry.value else {
                        return false;
                    };
                    for (field, value) in fields {
                        // As HSET does, a field written loses its own TTL.
                        entry.field_expiries.remove(field.to_bytes());
                        hash.insert(field.to_bytes().to_vec(), value.to_vec());
                    }
                    !fields.is_empty()
                });
                let mut command = String::from("HSET {key}");
                for (field, value) in fields {
                    let field = field.to_string_lossy();
                    let value = String::from_utf8_lossy(value);
                    command.push_str(&format!(" {field} {value}"));
                }
                (done, command)
            }
            Effect::HDel(field) => {
                let done = memory.write(&self.name, |entry| match entry {
                    Some(Stored {
                        value: Value::Hash(hash),
                        field_expiries,
                        ..
                    }) => {
                        field_expiries.remove(field.to_bytes());
                        hash.remove(field.to_bytes()).is_some()
                    }
                    _ => false,
                });
                (done, format!("HDEL {{key}} {}", field.to_string_lossy()))
            }
            Effect::ZAdd { score, member } => {
                let done = self.zset(|members| {
                    if members.iter().any(|(_, m)| m == member) {
                        return false;
                    }
                    insert(members, score as f64, member);
                    true
                });
                (done, format!("ZADD {{key}} {score} <member>"))
            }
            Effect::ZRescore { score, member } => {
                let done = self.zset(|members| {
                    let Some(at) = members.iter().position(|(_, m)| m == member) else {
                        return false;
                    };
                    members.remove(at);
                    insert(members, score as f64, member);
                    true
                });
                (done, format!("ZADD {{key}} XX {score} <member>"))
            }
            Effect::ZRem(member) => {
                let done = self.zset(|members| {
                    let before = members.len();
                    members.retain(|(_, m)| m != member);
                    members.len() < before
                });
                (done, "ZREM {key} <member>".to_string())
            }
            Effect::ZRemRangeByScore(cutoff) => {
                let done = self.zset(|members| {
                    let before = members.len();
                    members.retain(|(score, _)| *score > cutoff as f64);
                    members.len() < before
                });
                (done, format!("ZREMRANGEBYSCORE {{key}} -inf {cutoff}"))
            }
            Effect::ZRemNewest(count) => {
                let mut removed = 0;
                let done = self.zset(|members| {
                    removed = count.min(members.len());
                    members.truncate(members.len() - removed);
                    removed > 0
                });
                (done, format!("ZREMRANGEBYRANK {{key}} -{removed} -1"))
            }
            Effect::PExpireAt(at) => {
                let done = memory.write(&self.name, |entry| match entry {
                    Some(stored) => {
                        stored.expires_at = Some(at);
                        true
                    }
                    None => false,
                });
                (done, format!("PEXPIREAT {{key}} {at}"))
            }
            Effect::Persist => {
                let done = memory.write(&self.name, |entry| match entry {
                    Some(stored) => stored.expires_at.take().is_some(),
                    None => false,
                });
                (done, "PERSIST {key}".to_string())
            }
            Effect::Unlink => {
                let done = memory.write(&self.name, |entry| entry.take().is_some());
                (done, "UNLINK {key}".to_string())
            }
        };
        if done {
            self.log(command);
        }
        done
    }
}
