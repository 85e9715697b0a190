"""ratelimit-limits against limits' own Redis storage, side by side in one run, on each server
given: server CPU per call and client latency of the moving window, through limits' API.

    python bench.py REDIS_SERVER [REDIS_SERVER ...]     (RATELIMIT_MODULE: the release module)

For each server binary it starts one server with the module (real clock, no persistence) and
runs each scenario for both storages on it, alternately, on keys of their own:

- hot key, grants: one limit of 1 000 000 a minute, every hit granted;
- hot key, refusals: one limit of 100 a minute, full, every hit refused;
- hot key, window read: `get_window_stats` on that full limit (PEEK against limits' script);
- 200 000 keys at random: a limit of 10 a minute per key, every key hit once beforehand.

Per call: the command's time inside the server (INFO commandstats: RATELIMIT.ALLOW or PEEK
against EVALSHA, the script's inner calls included), the whole server's CPU (INFO CPU,
user + sys, delta over the calls: parsing and I/O included), and the client's p50 and p99
(perf_counter around each limits call, one call at a time).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "testing"))

from limits import RateLimitItemPerMinute  # noqa: E402
from limits.storage import storage_from_string  # noqa: E402
from limits.strategies import MovingWindowRateLimiter  # noqa: E402

import ratelimit_limits  # noqa: E402,F401
import servers  # noqa: E402

CALLS = int(os.environ.get("BENCH_CALLS", "20000"))
KEYS = int(os.environ.get("BENCH_KEYS", "200000"))


def server_cpu(client) -> float:
    cpu = client.info("cpu")
    return cpu["used_cpu_user"] + cpu["used_cpu_sys"]


def command_usec(client, command: str) -> tuple[int, float]:
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return stats.get("calls", 0), stats.get("usec", 0)


def measure(client, command: str, call, n: int) -> dict:
    client.config_resetstat()
    cpu = server_cpu(client)
    latencies = []
    for i in range(n):
        started = time.perf_counter()
        call(i)
        latencies.append(time.perf_counter() - started)
    cpu = server_cpu(client) - cpu
    calls, usec = command_usec(client, command)
    assert calls == n, f"{command}: {calls} calls for {n}"
    latencies.sort()
    return {
        "command_us": usec / n,
        "cpu_us": cpu * 1e6 / n,
        "p50_us": statistics.median(latencies) * 1e6,
        "p99_us": latencies[int(n * 0.99)] * 1e6,
    }


def storages(port: int):
    ours = storage_from_string(f"ratelimit://127.0.0.1:{port}", key_prefix="OURS")
    theirs = storage_from_string(f"redis://127.0.0.1:{port}", key_prefix="THEIRS")
    return [("ratelimit://", ours, "ratelimit.allow", "ratelimit.peek"),
            ("redis:// (limits' script)", theirs, "evalsha", "evalsha")]


def fill(limiter, item, key: str, n: int) -> None:
    for _ in range(n):
        assert limiter.hit(item, key)


def populate(storage, item, n: int) -> None:
    """Hits each of n keys once, pipelined: ALLOW or limits' acquire script, as a hit sends."""
    client = storage.get_connection()
    ours = isinstance(storage, ratelimit_limits.RatelimitStorage)
    for start in range(0, n, 2000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(n, start + 2000)):
            key = storage.prefixed_key(item.key_for(f"user{i}"))
            if ours:
                name = ratelimit_limits._window.limiter_name(storage.key_prefix, item.key_for(f"user{i}"))
                pipe.execute_command(*ratelimit_limits._window.allow_args(name, item.amount, item.get_expiry(), 1))
            else:
                pipe.evalsha(storage.lua_acquire_moving_window.sha, 1, key, time.time(),
                             item.amount, item.get_expiry(), 1)
        pipe.execute()


def scenarios(client, port: int):
    results = []
    contenders = storages(port)
    # The script is loaded by its first call; warm each storage up outside the measures.
    for _, storage, _, _ in contenders:
        MovingWindowRateLimiter(storage).hit(RateLimitItemPerMinute(1), "warm")
        MovingWindowRateLimiter(storage).get_window_stats(RateLimitItemPerMinute(1), "warm")
    for name, storage, hit_cmd, read_cmd in contenders:
        limiter = MovingWindowRateLimiter(storage)
        big = RateLimitItemPerMinute(1_000_000)
        results.append(("hot key, grants", name, measure(
            client, hit_cmd, lambda i: limiter.hit(big, "hot") or sys.exit("refused"), CALLS)))
    for name, storage, hit_cmd, read_cmd in contenders:
        limiter = MovingWindowRateLimiter(storage)
        full = RateLimitItemPerMinute(100)
        fill(limiter, full, "full", 100)
        results.append(("hot key, refusals", name, measure(
            client, hit_cmd, lambda i: limiter.hit(full, "full") and sys.exit("granted"), CALLS)))
        results.append(("hot key, window read", name, measure(
            client, read_cmd, lambda i: limiter.get_window_stats(full, "full"), CALLS)))
    for name, storage, hit_cmd, read_cmd in contenders:
        populate(storage, RateLimitItemPerMinute(10), KEYS)
    rng = random.Random(42)
    picks = [rng.randrange(KEYS) for _ in range(CALLS)]
    for name, storage, hit_cmd, read_cmd in contenders:
        limiter = MovingWindowRateLimiter(storage)
        item = RateLimitItemPerMinute(10)
        results.append((f"{KEYS:,} keys at random", name, measure(
            client, hit_cmd, lambda i: limiter.hit(item, f"user{picks[i]}"), CALLS)))
    return results


def main(binaries: list[str]) -> None:
    print(f"{CALLS} calls per row, one at a time; times in microseconds per call\n")
    for binary in binaries:
        os.environ["REDIS_SERVER"] = binary
        server = servers.Server()
        try:
            client = server.client()
            version = client.info("server")
            label = f"{'Valkey' if 'valkey_version' in version else 'Redis'} " + str(
                version.get("valkey_version", version["redis_version"]))
            rows = scenarios(client, server.port)
        finally:
            server.stop()
        print(f"### {label}\n")
        print("| scenario | storage | command in server | ratio | server CPU | ratio | client p50 | client p99 |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        by_scenario: dict[str, dict] = {}
        for scenario, name, r in rows:
            by_scenario.setdefault(scenario, {})[name] = r
        for scenario, pair in by_scenario.items():
            theirs = pair["redis:// (limits' script)"]
            for name, r in pair.items():
                print(f"| {scenario} | {name} | {r['command_us']:.1f} | "
                      f"{r['command_us'] / theirs['command_us']:.2f}x | {r['cpu_us']:.1f} | "
                      f"{r['cpu_us'] / theirs['cpu_us']:.2f}x | {r['p50_us']:.0f} | "
                      f"{r['p99_us']:.0f} |")
        print()


if __name__ == "__main__":
    main(sys.argv[1:] or ["redis-server"])
