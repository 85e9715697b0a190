//! The load options as module configurations: `CONFIG GET ratelimit.*`, `CONFIG SET` applying
//! at once, `MODULE LOADEX ... CONFIG`, lines of a configuration file, the old load arguments,
//! and `debug-commands` fixed at load.

use crate::common::*;

fn config_get(con: &mut Connection, pattern: &str) -> Vec<(String, String)> {
    let flat: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(pattern)
        .query(con)
        .expect("CONFIG GET");
    let mut pairs: Vec<(String, String)> = flat
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    pairs.sort();
    pairs
}

fn settings(con: &mut Connection) -> Vec<(String, String)> {
    config_get(con, "ratelimit.*")
}

/// The settings, sorted by name, with the counting's at their defaults.
fn pairs(cache: &str, debug: &str) -> Vec<(String, String)> {
    vec![
        ("ratelimit.config-cache".into(), cache.into()),
        ("ratelimit.debug-commands".into(), debug.into()),
        ("ratelimit.group-depth".into(), "2".into()),
        ("ratelimit.group-separator".into(), ":".into()),
        ("ratelimit.stats".into(), "yes".into()),
    ]
}

fn configs_kept(con: &mut Connection) -> i64 {
    info_field(con, "ratelimit", "ratelimit_configs_kept")
        .expect("ratelimit_configs_kept")
        .parse()
        .expect("a number")
}

/// Two calls on a fresh limiter: the second finds its configuration kept, where the server
/// lets the module keep them (not where hash fields can carry TTLs the module cannot see).
fn use_limiter(con: &mut Connection, name: &str) {
    let _: i64 = line(con, &format!("RATELIMIT.SETRATE {name} 5 1000")).unwrap();
    for _ in 0..2 {
        let _: Value = line(con, &format!("RATELIMIT.TRYACQUIRE {name}")).unwrap();
    }
}

#[test]
fn config_get_lists_them_and_config_set_applies_at_once() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(settings(&mut con), pairs("yes", "yes"));
    use_limiter(&mut con, "a");
    let keeps = configs_kept(&mut con);
    assert!(keeps <= 1);
    let _: () = line(&mut con, "CONFIG SET ratelimit.config-cache no").unwrap();
    assert_eq!(settings(&mut con), pairs("no", "yes"));
    assert_eq!(
        configs_kept(&mut con),
        0,
        "turning it off forgets what was kept"
    );
    use_limiter(&mut con, "b");
    assert_eq!(configs_kept(&mut con), 0, "nothing is kept while off");
    let _: () = line(&mut con, "CONFIG SET ratelimit.config-cache yes").unwrap();
    use_limiter(&mut con, "c");
    assert_eq!(configs_kept(&mut con), keeps, "kept again once on");
    // The limiters work the same either way.
    let _: () = line(&mut con, "CONFIG SET ratelimit.config-cache no").unwrap();
    let _: i64 = line(&mut con, "HSET c rate 1").unwrap();
    assert_eq!(available(&mut con, "c"), 0, "the changed rate is read");
    // debug-commands is fixed at load; a bad value is refused and changes nothing.
    let error = error_of(&mut con, "CONFIG SET ratelimit.debug-commands no");
    assert!(error.contains("immutable"), "{error}");
    let error = error_of(&mut con, "CONFIG SET ratelimit.config-cache maybe");
    assert!(error.contains("ratelimit.config-cache"), "{error}");
    assert_eq!(settings(&mut con), pairs("no", "yes"));
}

#[test]
fn the_old_load_arguments_still_work() {
    let server = Server::start_with(&["config-cache", "no", "debug-commands", "yes"], &[]);
    let mut con = server.conn();
    assert_eq!(settings(&mut con), pairs("no", "yes"));
    use_limiter(&mut con, "a");
    assert_eq!(configs_kept(&mut con), 0);
    let plain = Server::start_with(&[], &[]);
    let mut con = plain.conn();
    assert_eq!(settings(&mut con), pairs("yes", "no"));
    assert!(error_of(&mut con, "RATELIMIT.DEBUG REALCLOCK").starts_with("ERR unknown command"));
}

#[test]
fn module_loadex_takes_them() {
    let server = Server::start_plain(&["--enable-module-command", "yes"]);
    let mut con = server.conn();
    let module = module_path();
    let module = module.to_str().unwrap();
    let loaded: String = line(
        &mut con,
        &format!(
            "MODULE LOADEX {module} CONFIG ratelimit.config-cache no \
             CONFIG ratelimit.debug-commands yes"
        ),
    )
    .unwrap();
    assert_eq!(loaded, "OK");
    assert_eq!(settings(&mut con), pairs("no", "yes"));
    let _: String = line(&mut con, "RATELIMIT.DEBUG REALCLOCK").unwrap();
    // A value the module refuses fails the load, as for any module's configuration.
    let _: String = line(&mut con, "MODULE UNLOAD ratelimit").unwrap();
    let error = error_of(
        &mut con,
        &format!("MODULE LOADEX {module} CONFIG ratelimit.config-cache sometimes"),
    );
    assert!(error.starts_with("ERR"), "{error}");
    let modules: Value = line(&mut con, "MODULE LIST").unwrap();
    assert!(!format!("{modules:?}").contains("ratelimit"), "{modules:?}");
}

#[test]
fn a_configuration_file_sets_them() {
    let dir = std::env::temp_dir().join(format!("ratelimit-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ratelimit.conf");
    std::fs::write(
        &file,
        format!(
            "loadmodule {}\nratelimit.config-cache no\nratelimit.debug-commands yes\n",
            module_path().display()
        ),
    )
    .unwrap();
    let server = Server::start_plain(&["--include", file.to_str().unwrap()]);
    let mut con = server.conn();
    assert_eq!(settings(&mut con), pairs("no", "yes"));
    let _: String = line(&mut con, "RATELIMIT.DEBUG REALCLOCK").unwrap();
    // CONFIG REWRITE would write them back as such lines; the server lists them as its own.
    let all = config_get(&mut con, "*config-cache*");
    assert_eq!(
        all,
        vec![("ratelimit.config-cache".to_string(), "no".to_string())]
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server without the module that knows each command of `renames` by its new name, and what
/// `MODULE LOAD` of the module answers there.
fn load_where_renamed(renames: &[(&str, &str)]) -> (Server, Connection, redis::RedisResult<Value>) {
    let mut args = vec!["--enable-module-command", "yes"];
    for (command, renamed) in renames {
        args.extend(["--rename-command", command, renamed]);
    }
    let server = Server::start_plain(&args);
    let mut con = server.conn();
    let loaded = redis::cmd("MODULE")
        .arg("LOAD")
        .arg(module_path().to_string_lossy().as_ref())
        .query(&mut con);
    (server, con, loaded)
}

/// Replicas and the AOF get the module's writes as plain commands (SET, HSET, ZADD ...): on a
/// server that knows one of them by another name (`rename-command`) they would miss the writes
/// made as it, so the module refuses to load there and its log says why. Renaming another
/// command does not stop it loading.
#[test]
fn a_server_that_renamed_a_replicated_command_is_refused() {
    let (server, mut con, loaded) = load_where_renamed(&[("ZADD", "ZADD_RENAMED")]);
    assert!(loaded.is_err(), "loaded: {loaded:?}");
    let log = server.log();
    assert!(
        log.contains("does not know ZADD by that name"),
        "the log says why:\n{log}"
    );
    let modules: Value = line(&mut con, "MODULE LIST").unwrap();
    assert!(!format!("{modules:?}").contains("ratelimit"), "{modules:?}");
    drop(server);

    let (_server, mut con, loaded) = load_where_renamed(&[("FLUSHALL", "FLUSHALL_RENAMED")]);
    loaded.expect("MODULE LOAD where an unrelated command is renamed");
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE api 1 1000").unwrap(),
        1
    );
}

/// Where `COMMAND` itself is renamed the module cannot ask: it loads, and its log says it could
/// not check.
#[test]
fn a_server_that_cannot_say_loads_the_module_with_a_warning() {
    let (server, mut con, loaded) = load_where_renamed(&[("COMMAND", "COMMAND_RENAMED")]);
    loaded.expect("MODULE LOAD where COMMAND is renamed");
    let log = server.log();
    assert!(log.contains("could not check"), "the log says so:\n{log}");
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE api 1 1000").unwrap(),
        1
    );
}

/// The names of a map reply's fields (a RESP3 map, or a RESP2 flat array of pairs), each value
/// an integer or nil.
fn field_names(reply: Value) -> Vec<String> {
    let pairs: Vec<(Value, Value)> = match reply {
        Value::Map(pairs) => pairs,
        Value::Array(flat) => flat
            .chunks(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    };
    pairs
        .into_iter()
        .map(|(name, value)| {
            assert!(matches!(value, Value::Int(_) | Value::Nil), "{value:?}");
            match name {
                Value::BulkString(name) => String::from_utf8(name).expect("utf-8"),
                other => panic!("a name not a bulk string: {other:?}"),
            }
        })
        .collect()
}

/// The fields ALLOW, ALLOWALL and PEEK name, in RESP2 then in RESP3.
fn named_fields(server: &Server) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for mut con in [server.conn(), server.conn_resp3()] {
        line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 60000").unwrap();
        for command in [
            "RATELIMIT.ALLOW api",
            "RATELIMIT.ALLOWALL 1 api",
            "RATELIMIT.PEEK api",
            "RATELIMIT.ALLOW one RATE 3 60000 ONEKEY",
        ] {
            out.push(field_names(line(&mut con, command).unwrap()));
        }
        line::<i64>(&mut con, "UNLINK api one").unwrap();
    }
    out
}

/// ALLOW, ALLOWALL and PEEK write their fields' names from replies made once at load: an ECHO
/// each when the server loads the module at startup, none per call, and the same names in RESP2
/// and RESP3. Where ECHO is renamed away the module loads, says so, and writes the same names
/// as plain bulk strings; a command renamed ECHO that writes is not run. (That the kept replies
/// are what a call writes shows only in the instructions `make bench` counts: the bytes are the
/// same by design.)
#[test]
fn field_names_are_made_at_load_or_written_plainly() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(command_calls(&mut con, "echo"), 7, "an ECHO per name");
    let made = named_fields(&server);
    assert_eq!(command_calls(&mut con, "echo"), 7, "none per call");
    let verdict = [
        "allowed",
        "limit",
        "remaining",
        "retry_after",
        "reset_after",
    ];
    let peek = [&verdict[..], &["oldest_after"]].concat();
    let all = [&verdict[..], &["limited_by"]].concat();
    for resp in made.chunks(4) {
        assert_eq!(resp, [&verdict[..], &all, &peek, &verdict]);
    }
    assert!(!server.log().contains("field names not made"));
    drop(server);

    let server = Server::start_plain(&[
        "--enable-module-command",
        "yes",
        "--rename-command",
        "ECHO",
        "ECHO_RENAMED",
        "--rename-command",
        "DEL",
        "ECHO",
    ]);
    let mut con = server.conn();
    // Keys the load would delete, were it to run the DEL now named ECHO.
    line::<()>(&mut con, "MSET allowed 1 limit 1 oldest_after 1").unwrap();
    redis::cmd("MODULE")
        .arg("LOAD")
        .arg(module_path().to_string_lossy().as_ref())
        .query::<()>(&mut con)
        .expect("MODULE LOAD where ECHO is renamed");
    let log = server.log();
    assert!(log.contains("field names not made at load"), "{log}");
    assert_eq!(named_fields(&server), made);
    assert_eq!(
        line::<i64>(&mut con, "EXISTS allowed limit oldest_after").unwrap(),
        3
    );
}

/// A replica and every node of a cluster make the names at load too (a name not made would
/// cost every call there, with nothing else to show it).
#[test]
fn field_names_are_made_on_a_replica_and_on_cluster_nodes() {
    let master = Server::start();
    let replica = Server::start_replica(&master, true);
    assert_eq!(command_calls(&mut replica.conn(), "echo"), 7);
    assert!(!replica.log().contains("field names not made"));
    drop((master, replica));

    let mut cluster = cluster::Cluster::start();
    for (node, con) in cluster.nodes.iter().zip(&mut cluster.conns) {
        assert_eq!(command_calls(con, "echo"), 7);
        assert!(!node.log().contains("field names not made"));
    }
}
