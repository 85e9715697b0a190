"""ratelimit-limits against limits' own Redis storage, side by side in one run, on each server
given: server CPU per call and client latency of the moving window, through limits' API.

    python bench.py REDIS_SERVER [REDIS_SERVER ...]     (RATELIMIT_MODULE: the release module)

    CALLS (20 000) calls per storage and scenario, over ROUNDS (7) rounds; KEYS (200 000) keys.

For each server binary it starts one server with the module (real clock, no persistence) and
runs each scenario for both storages on it, on keys of their own:

- hot key, grants: one limit of 1 000 000 a minute, every hit granted;
- hot key, refusals: one limit of 100 a minute, full, every hit refused;
- hot key, window read: `get_window_stats` on that full limit (PEEK against limits' script);
- 200 000 keys at random: a limit of 10 a minute per key, every key hit once beforehand.

Each scenario runs in ROUNDS rounds of CALLS/ROUNDS calls per storage, the storages' order
alternated each round, so a change in the machine's load falls on both alike. Per storage's
share of a round: the command's time inside the server (INFO commandstats: RATELIMIT.ALLOW or
PEEK against EVALSHA, the script's inner calls included), the whole server's CPU (INFO CPU,
user + sys: parsing and I/O included) and, where INFO gives it, the main thread's, each a delta
around the share. Reported: per storage the medians over the rounds, the client's p50 and p99
over all its calls (perf_counter around each limits call, one call at a time), and for ours the
median of the rounds' ratios to limits' script, with their range and a held/MISSED verdict.
"""

from __future__ import annotations

import math
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


def positive(name: str, default: str) -> int:
    text = os.environ.get(name, default)
    if not text.isdigit() or int(text) < 1:
        sys.exit(f"bench: {name} must be a positive integer, not {text!r}")
    return int(text)


CALLS = positive("CALLS", "20000")
ROUNDS = positive("ROUNDS", "7")
KEYS = positive("KEYS", "200000")
PER_ROUND = math.ceil(CALLS / ROUNDS)
OURS = "ratelimit://"
THEIRS = "redis:// (limits' script)"
# The keys made before the rounds live this long: both storages' keys are made before the first
# round, and a key whose minute ran out before its storage's last round would be measured as a
# new one (a hit re-arms its minute, as in production).
KEYS_LIVE_MS = 30 * 60_000


def reading(client, command: str) -> dict:
    """The server's counters: the command's calls, failures and usec, the process's CPU seconds
    and, where INFO gives them (Redis 7+, Valkey), the main thread's."""
    info = client.info("cpu", "commandstats")
    stats = info.get(f"cmdstat_{command}", {})
    main = None
    if "used_cpu_user_main_thread" in info:
        main = info["used_cpu_user_main_thread"] + info["used_cpu_sys_main_thread"]
    return {
        "calls": stats.get("calls", 0),
        "failed": stats.get("failed_calls", 0) + stats.get("rejected_calls", 0),
        "usec": stats.get("usec", 0),
        "cpu": info["used_cpu_user"] + info["used_cpu_sys"],
        "main": main,
    }


def share(client, command: str, call, first: int, latencies: list) -> dict:
    """One storage's share of a round: PER_ROUND calls, one at a time, the counters read around
    them; call(i) is given the call's index over all rounds, first to first + PER_ROUND."""
    before = reading(client, command)
    for i in range(first, first + PER_ROUND):
        started = time.perf_counter()
        call(i)
        latencies.append(time.perf_counter() - started)
    after = reading(client, command)
    calls = after["calls"] - before["calls"]
    failed = after["failed"] - before["failed"]
    assert calls == PER_ROUND and failed == 0, \
        f"{command}: {calls} calls ({failed} failed) for {PER_ROUND}"
    return {
        "command": (after["usec"] - before["usec"]) / PER_ROUND,
        "cpu": (after["cpu"] - before["cpu"]) * 1e6 / PER_ROUND,
        "main": None if before["main"] is None
        else (after["main"] - before["main"]) * 1e6 / PER_ROUND,
    }


def storages(port: int):
    ours = storage_from_string(f"ratelimit://127.0.0.1:{port}", key_prefix="OURS")
    theirs = storage_from_string(f"redis://127.0.0.1:{port}", key_prefix="THEIRS")
    return [(OURS, ours, "ratelimit.allow", "ratelimit.peek"),
            (THEIRS, theirs, "evalsha", "evalsha")]


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


def keep_keys(client) -> None:
    """Gives every key with a TTL at least KEYS_LIVE_MS to live (PEXPIRE ... GT)."""
    cursor = 0
    while True:
        cursor, keys = client.scan(cursor, count=2000)
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.execute_command("PEXPIRE", key, KEYS_LIVE_MS, "GT")
        pipe.execute()
        if cursor == 0:
            return


def settle(client) -> None:
    """Waits until the key table is not being rehashed: a table being grown makes every lookup
    probe two tables and every command move buckets, which would fall on whoever runs next."""
    for _ in range(600):
        if "rehashing target" not in str(client.execute_command("DEBUG", "HTSTATS", 0)):
            return
        time.sleep(0.1)
    raise RuntimeError("bench: the key table still rehashing after 60 s")


def rounds(client, contenders, scenario: str, make_call, prepare=None) -> list:
    """ROUNDS rounds of PER_ROUND calls per storage, the storages' order alternated each round.
    make_call(limiter, round) gives the call of a storage; prepare(limiter, round), if given,
    runs before the round's shares, outside them. Returns a row per storage."""
    per = {name: {"rounds": [], "latencies": []} for name, *_ in contenders}
    limiters = {name: MovingWindowRateLimiter(storage) for name, storage, *_ in contenders}
    for r in range(ROUNDS):
        if prepare:
            for name, *_ in contenders:
                prepare(limiters[name], r)
        order = contenders if r % 2 == 0 else contenders[::-1]
        for name, storage, command in order:
            per[name]["rounds"].append(share(client, command, make_call(limiters[name], r),
                                             r * PER_ROUND, per[name]["latencies"]))
        print(f"{scenario}: round {r + 1}/{ROUNDS} done", file=sys.stderr, flush=True)
    rows = []
    base = per[THEIRS]["rounds"]
    for name, *_ in contenders:
        got = per[name]["rounds"]
        latencies = sorted(per[name]["latencies"])
        n = len(latencies)
        row = {"scenario": scenario, "storage": name, "p50_us": statistics.median(latencies) * 1e6,
               "p99_us": latencies[min(n - 1, int(n * 0.99))] * 1e6}
        for field in ("command", "cpu", "main"):
            if got[0][field] is None:
                row[field] = row[f"{field}_ratios"] = None
                continue
            row[field] = statistics.median(x[field] for x in got)
            row[f"{field}_ratios"] = [x[field] / b[field] for x, b in zip(got, base)]
        rows.append(row)
    return rows


def scenarios(client, port: int):
    results = []
    contenders = storages(port)
    # The script is loaded by its first call; warm each storage up outside the measures.
    for _, storage, _, _ in contenders:
        MovingWindowRateLimiter(storage).hit(RateLimitItemPerMinute(1), "warm")
        MovingWindowRateLimiter(storage).get_window_stats(RateLimitItemPerMinute(1), "warm")
    hits = [(name, storage, hit_cmd) for name, storage, hit_cmd, _ in contenders]
    reads = [(name, storage, read_cmd) for name, storage, _, read_cmd in contenders]

    big = RateLimitItemPerMinute(1_000_000)
    results += rounds(client, hits, "hot key, grants", lambda limiter, r: (
        lambda i: limiter.hit(big, "hot") or sys.exit("refused")))

    # A full limit of its own for each round, filled just before it: a limit filled once would
    # free up a minute later, and the rounds may outlast the minute.
    full = RateLimitItemPerMinute(100)
    results += rounds(client, hits, "hot key, refusals", lambda limiter, r: (
        lambda i: limiter.hit(full, f"full{r}") and sys.exit("granted")),
        prepare=lambda limiter, r: fill(limiter, full, f"full{r}", 100))
    results += rounds(client, reads, "hot key, window read", lambda limiter, r: (
        lambda i: limiter.get_window_stats(full, f"read{r}")),
        prepare=lambda limiter, r: fill(limiter, full, f"read{r}", 100))

    item = RateLimitItemPerMinute(10)
    for name, storage, hit_cmd, read_cmd in contenders:
        populate(storage, item, KEYS)
    keep_keys(client)
    settle(client)
    rng = random.Random(42)
    picks = [rng.randrange(KEYS) for _ in range(PER_ROUND * ROUNDS)]
    results += rounds(client, hits, f"{KEYS:,} keys at random", lambda limiter, r: (
        lambda i: limiter.hit(item, f"user{picks[i]}")))
    return results


def verdict(median: float, ratios: list[float]) -> str:
    return (f"{median:.3f}x {'held' if median <= 1 else 'MISSED'} "
            f"(rounds {min(ratios):.2f}-{max(ratios):.2f}x)")


def report(label: str, rows: list[dict]) -> None:
    has_main = rows[0]["main"] is not None
    print(f"### {label}\n")
    print(f"{ROUNDS} rounds of {PER_ROUND} calls per storage and scenario, one at a time, the "
          f"storages' order alternated each round (load average {os.getloadavg()[0]:.1f}, "
          f"{os.cpu_count()} cores). Medians over the rounds; the ratio is the median of the "
          f"rounds' ratios to limits' script; p50/p99 over all the storage's calls.\n")
    main_head, main_rule = ("| main thread CPU | ratio ", "---:|---:|") if has_main else ("", "")
    print(f"| scenario | storage | command in server | ratio | server CPU | ratio {main_head}"
          f"| client p50 | client p99 |")
    print(f"|---|---|---:|---:|---:|---:|{main_rule}---:|---:|")
    ratio = lambda r, f: f"{statistics.median(r[f + '_ratios']):.2f}x"  # noqa: E731
    for r in rows:
        main = f"| {r['main']:.1f} | {ratio(r, 'main')} " if has_main else ""
        print(f"| {r['scenario']} | {r['storage']} | {r['command']:.1f} | {ratio(r, 'command')} | "
              f"{r['cpu']:.1f} | {ratio(r, 'cpu')} {main}| {r['p50_us']:.0f} | "
              f"{r['p99_us']:.0f} |")
    print()
    for r in rows:
        if r["storage"] != OURS:
            continue
        main = (f", main thread {statistics.median(r['main_ratios']):.3f}x"
                f" (rounds {min(r['main_ratios']):.2f}-{max(r['main_ratios']):.2f}x)"
                if has_main else "")
        print(f"{r['scenario']}: {OURS} <= {THEIRS}: command "
              f"{verdict(statistics.median(r['command_ratios']), r['command_ratios'])}, "
              f"server CPU {verdict(statistics.median(r['cpu_ratios']), r['cpu_ratios'])}{main}")
    print()


def main(binaries: list[str]) -> None:
    print(f"{PER_ROUND * ROUNDS} calls per storage and scenario in {ROUNDS} rounds; "
          f"times in microseconds per call\n")
    for binary in binaries:
        os.environ["REDIS_SERVER"] = binary
        server = servers.Server("--enable-debug-command", "local")
        started = time.monotonic()
        try:
            client = server.client()
            version = client.info("server")
            label = f"{'Valkey' if 'valkey_version' in version else 'Redis'} " + str(
                version.get("valkey_version", version["redis_version"]))
            rows = scenarios(client, server.port)
        finally:
            server.stop()
        report(label, rows)
        print(f"({label}: {time.monotonic() - started:.0f} s)\n", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["redis-server"])
