//! The benchmark's redis-server: the harness the tests use (`tests/it/common/server.rs`), with the
//! release module and its debug commands, optionally under a wrapper (valgrind), and errors
//! returned rather than panics.

use std::env;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::Connection;

use crate::Res;

#[path = "../../tests/it/common/server.rs"]
mod shared;

pub use shared::{server_binary, Server};

/// redis-server on a free loopback port, with the module and its debug commands, no
/// persistence; `wrapper` runs it under another program (valgrind); `extra` are more server
/// options. Stop it with [`stop`] to let it exit cleanly; dropping it kills it.
pub fn start(module: &Path, wrapper: &[String], extra: &[&str]) -> Res<Server> {
    start_after(&[], module, wrapper, extra)
}

/// As [`start`], with server arguments that come before the module's `--loadmodule`: another
/// module loaded first (redis-cell, whose `CL.THROTTLE` the module then leaves to it).
pub fn start_after(
    first: &[&str],
    module: &Path,
    wrapper: &[String],
    extra: &[&str],
) -> Res<Server> {
    if !module.exists() {
        return Err(format!(
            "{} is missing: run `make bench`, or `cargo build --release` first",
            module.display()
        )
        .into());
    }
    let mut command = wrapper.to_vec();
    command.push(if wrapper.is_empty() {
        server_binary()
    } else {
        server_binary_path().to_string_lossy().into_owned()
    });
    let mut args: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    args.extend([
        "--loadmodule".into(),
        module.to_string_lossy().into_owned(),
        "debug-commands".into(),
        "yes".into(),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let root = env::temp_dir().join("ratelimit-bench");
    // Under valgrind the server takes a while to come up.
    let ready_within = Duration::from_secs(if wrapper.is_empty() { 10 } else { 120 });
    Server::spawn(&command, &args, &root, ready_within)
        .map_err(|log| format!("redis-server did not start:\n{log}").into())
}

/// A connection that waits up to 2 minutes to connect (a server under valgrind is slow).
pub fn connect(server: &Server) -> Res<Connection> {
    Ok(server
        .client()
        .get_connection_with_timeout(Duration::from_secs(120))?)
}

/// Asks the server to exit (callgrind writes its last dump on exit), then makes sure.
pub fn stop(server: Server) {
    server.shutdown(Duration::from_secs(10));
}

/// valgrind needs a path, not a name to look up.
fn server_binary_path() -> PathBuf {
    let name = server_binary();
    which(&name).unwrap_or_else(|| PathBuf::from(name))
}

/// `tool` on the PATH (or `tool` itself, if it is a path that exists).
pub fn which(tool: &str) -> Option<PathBuf> {
    if tool.contains('/') {
        let p = PathBuf::from(tool);
        return p.exists().then_some(p);
    }
    env::var_os("PATH").and_then(|paths| {
        env::split_paths(&paths)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    })
}

/// `$RATELIMIT_MODULE`, else `$CARGO_TARGET_DIR/release/libratelimit.so`, else
/// `target/release/libratelimit.so` in this repository.
///
/// Always absolute: redis-server resolves a relative `--loadmodule` path after moving into its
/// own `--dir`.
pub fn module_path() -> PathBuf {
    let path = match env::var_os("RATELIMIT_MODULE") {
        Some(path) => PathBuf::from(path),
        None => {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let target = env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("target"));
            root.join(target).join("release/libratelimit.so")
        }
    };
    std::fs::canonicalize(&path).unwrap_or(path)
}
