//! The GCRA references, run for real: Redis at the commit that has the `GCRA` command (built
//! with libc malloc) with redis-cell 0.5.0 loaded into it, their wall clock held still by
//! Debian's libfaketime so that a call to them and a call to the module (on its debug clock)
//! happen at the same instant.
//!
//! Both come from the sources kept beside the project (`../shared/servers`), built by
//! `.ci/fetch-shared` under `target/`. A user's clone has no `../shared`: there the comparison
//! tests say so and pass without comparing; under CI (`CI=true`) a missing reference fails.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::server::Server;

/// The reference server and the file its frozen clock is read from on every call.
pub struct Reference {
    pub server: Server,
    clock: PathBuf,
}

impl Reference {
    /// The reference server frozen at `unix_ms`, or None (and why, on stderr) where the
    /// references cannot be had: outside CI only.
    pub fn start(unix_ms: i64) -> Option<Reference> {
        let (server, cell, faketime) = match paths() {
            Ok(paths) => paths,
            Err(why) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "the GCRA references are required in CI: {why}"
                );
                eprintln!("SKIPPED: no GCRA reference to compare with: {why}");
                return None;
            }
        };
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let clock = root.join(format!(
            "faketime-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        write_instant(&clock, unix_ms);
        let command = vec![
            "env".to_string(),
            "TZ=UTC".to_string(),
            format!("LD_PRELOAD={}", faketime.display()),
            format!("FAKETIME_TIMESTAMP_FILE={}", clock.display()),
            "FAKETIME_NO_CACHE=1".to_string(),
            "FAKETIME_DONT_FAKE_MONOTONIC=1".to_string(),
            server.display().to_string(),
        ];
        let args = vec![
            "--loadmodule".to_string(),
            cell.display().to_string(),
            "--enable-debug-command".to_string(),
            "local".to_string(),
        ];
        let server = Server::spawn(&command, &args, root, super::HANG)
            .unwrap_or_else(|log| panic!("the reference server did not start:\n{log}"));
        // Keys expire only when a command reads them, at the frozen instant: the server's cron
        // deleted a key a millisecond before its expiry now and then, between the GET and the
        // PEXPIRETIME that read its state (its active expiry does not keep to the frozen clock).
        let _: () = redis::cmd("DEBUG")
            .arg("SET-ACTIVE-EXPIRE")
            .arg(0)
            .query(&mut server.conn())
            .expect("DEBUG SET-ACTIVE-EXPIRE 0 on the reference server");
        Some(Reference { server, clock })
    }

    /// Moves the reference's clock to `unix_ms` (exact to the millisecond).
    pub fn set_time(&self, unix_ms: i64) {
        write_instant(&self.clock, unix_ms);
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.clock);
    }
}

/// libfaketime reads the fraction as a double: `.206` would be 205.999999 ms, so a few tenths of
/// a nanosecond are added to land every millisecond exactly.
fn write_instant(file: &Path, unix_ms: i64) {
    let (seconds, ms) = (unix_ms.div_euclid(1000), unix_ms.rem_euclid(1000));
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let text = format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{ms:03}0000004\n",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    );
    let partial = file.with_extension("new");
    fs::write(&partial, text).expect("write the faketime instant");
    fs::rename(&partial, file).expect("move the faketime instant into place");
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The reference server, redis-cell's library and libfaketime: from `$GCRA_REFERENCE_SERVER`
/// and `$REDIS_CELL` if set, otherwise built from `../shared/servers` (once, cached; the tests
/// of one binary, running in parallel, wait for one build).
fn paths() -> Result<(PathBuf, PathBuf, PathBuf), String> {
    static PATHS: OnceLock<Result<(PathBuf, PathBuf, PathBuf), String>> = OnceLock::new();
    PATHS.get_or_init(find).clone()
}

fn find() -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let faketime = ["x86_64-linux-gnu", "aarch64-linux-gnu"]
        .iter()
        .map(|arch| PathBuf::from(format!("/usr/lib/{arch}/faketime/libfaketime.so.1")))
        .find(|path| path.exists())
        .ok_or(
            "libfaketime is not installed (Debian: apt-get install faketime; `make deps` does)",
        )?;
    let server = from_env_or_built("GCRA_REFERENCE_SERVER", "redis-gcra")?;
    let cell = from_env_or_built("REDIS_CELL", "redis-cell")?;
    Ok((server, cell, faketime))
}

/// A build of one of the shared sources (`redis-gcra`, `redis-cell`), from `$variable` or
/// `.ci/fetch-shared name`; None (and why, on stderr) where there is none, outside CI only.
pub fn shared_build(variable: &str, name: &str) -> Option<PathBuf> {
    match from_env_or_built(variable, name) {
        Ok(path) => Some(path),
        Err(why) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{name} is required in CI: {why}"
            );
            eprintln!("SKIPPED: no {name}: {why}");
            None
        }
    }
}

fn from_env_or_built(variable: &str, name: &str) -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var(variable) {
        return Ok(PathBuf::from(path));
    }
    let project = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(project.join(".ci/fetch-shared"))
        .arg(name)
        .output()
        .map_err(|e| format!(".ci/fetch-shared {name}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            ".ci/fetch-shared {name} failed (set {variable} to a build of it):\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim().to_string(),
    ))
}
