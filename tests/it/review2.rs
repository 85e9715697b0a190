//! Found by a review of the move of all unsafe code into `ffi`, the KEY server event and the
//! kept configurations: another module calling the commands, and a key that appears under a
//! waiter.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::common::waiters::*;
use crate::common::*;

/// A value key that *appears* (RENAME, COPY, MOVE or RESTORE onto a missing key) can free
/// permits: a missing value is derived from the log. Only a generic `rename_to` / `copy_to` /
/// `move_to` / `restore` event says so, which the waiters hear on Redis 7.0 only (elsewhere the
/// module does not subscribe to that class: Valkey 8.1 leaves the client of MOVE or COPY ... DB in
/// the wrong database when a module does). docs/commands/acquire.md says so; the waiter is
/// served at its next check, here the clock's next move.
#[test]
fn a_value_key_renamed_into_place_frees_the_waiter_by_its_next_check() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let set: i64 = line(&mut con, "RATELIMIT.SETRATE x 2 1000").unwrap();
    assert_eq!(set, 1);
    assert_eq!(try_acquire(&mut con, "x", 2), None);
    // A missing value is derived from the log: nothing is available.
    let deleted: i64 = line(&mut con, "DEL {x}:value").unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(available(&mut con, "x"), 0);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE x 1");
    assert!(!exists(&mut con, "{x}:value"), "a refusal writes no value");
    let ok: String = line(&mut con, "SET staged 1").unwrap();
    assert_eq!(ok, "OK");
    let ok: String = line(&mut con, "RENAME staged {x}:value").unwrap();
    assert_eq!(ok, "OK");
    // 1 ms later, far from when the log frees anything: only the value freed a permit.
    advance(&mut con, 1);
    assert_eq!(
        served_within(waiter, Duration::from_secs(5)).reply,
        Reply::Acquired,
        "the value written by RENAME frees a permit"
    );
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
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("review2-caller");
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
