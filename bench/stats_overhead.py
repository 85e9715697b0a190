#!/usr/bin/env python3
"""What the counting costs (`ratelimit.stats yes` against `no`, switched at run time on one
server, side by side in one run): TRYACQUIRE's grant and refusal on one hot limiter and on
200 000 limiters at random (`make bench-stats`; also run by `make bench`).

  stats_overhead.py SERVER MODULE.so [rounds]

PHASES=time or PHASES=instructions runs one of the two; USERS=n changes the 200 000.

Two measurements, each on a server of its own:
- time: server CPU per call inside the command (`INFO commandstats` usec / calls) and the
  client's wall time per call (pipelined batches of 1 000), in paired rounds that alternate
  which setting goes first; the median of the on/off ratios is reported.
- instructions: callgrind, inside the module's command dispatcher only, 2 000 calls per phase,
  in the order on, off, off, on (the mean of each pair).

The hot grant limiter has a rate it never reaches (PRECISION 60000 keeps its log at one entry);
the hot refusal limiter took its only permit. At random: 200 000 grant limiters
(`api:user:<i>`) and 200 000 refusal limiters (`login:ip:<i>`, each refused every call after its
first), so every refusal feeds the most-refused sketch a name it rarely holds: its worst case.
Every reply is checked (nil = granted, an integer wait = refused). The config cache is held in
use (`RATELIMIT.DEBUG CONFIGCACHE ALWAYS`, so the module is loaded with `debug-commands yes`):
left to itself it goes out of use while calls spread over the 200 000 and back in use some
calls after they return to the hot limiter, which moved the hot limiter's cost by 14% between
phases, whatever the setting measured.
"""
import glob, os, random, re, shutil, socket, statistics, subprocess, sys, time
import redis

BATCH = 1000
USERS = int(os.environ.get("USERS", "200000"))


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def start(server, module, wrapper=None, tag="x"):
    port = free_port()
    d = f"/tmp/stats-bench/run-{tag}-{port}"
    os.makedirs(d, exist_ok=True)
    argv = (wrapper or []) + [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", d, "--logfile", f"{d}/log",
                              "--loadmodule", module, "debug-commands", "yes"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    con = redis.Redis(port=port, socket_timeout=3600)
    for _ in range(600):
        try:
            con.ping(); break
        except Exception:
            time.sleep(0.2)
    return proc, con


def pipe(con, commands, check=None):
    for s in range(0, len(commands), BATCH):
        p = con.pipeline(transaction=False)
        for c in commands[s:s + BATCH]:
            p.execute_command(*c)
        for r in p.execute():
            if check is not None:
                check(r)


def granted(r):
    assert r is None, r


def refused(r):
    assert isinstance(r, int) and r > 0, r


def setup(con):
    # The config cache held in use: its switching in and out of use as calls move between the
    # hot limiter and the 200 000 would otherwise change the cost from one phase to the next.
    con.execute_command("RATELIMIT.DEBUG", "CONFIGCACHE", "ALWAYS")
    con.execute_command("RATELIMIT.SETRATE", "hot:grant:1", 1000000000, 60000, "PRECISION", 60000)
    con.execute_command("RATELIMIT.SETRATE", "hot:refusal:1", 1, 86400000)
    assert con.execute_command("RATELIMIT.TRYACQUIRE", "hot:refusal:1") is None
    pipe(con, [("RATELIMIT.TRYACQUIRE", f"api:user:{i}", 1, "RATE", 1000000000, 60000,
                "PRECISION", 60000) for i in range(USERS)], granted)
    pipe(con, [("RATELIMIT.TRYACQUIRE", f"login:ip:{i}", 1, "RATE", 1, 86400000)
               for i in range(USERS)], granted)
    warm_sketch(con)


def warm_sketch(con):
    """The most-refused sketch as a server that has run for minutes holds it: three windows of
    600 distinct refused names each, on the debug clock, ending before now. A fresh sketch
    allocates its counters and their names over its first two windows; the phases then measure
    the steady state, in which a window that starts over reuses the memory of the one before."""
    seconds, micros = con.time()
    now_ms = seconds * 1000 + micros // 1000
    con.execute_command("RATELIMIT.DEBUG", "SETCLOCK", now_ms - 4 * 60000)
    for w in range(3):
        names = [f"warm:{w}:{i}" for i in range(600)]
        pipe(con, [("RATELIMIT.TRYACQUIRE", n, 1, "RATE", 1, 1000) for n in names], granted)
        pipe(con, [("RATELIMIT.TRYACQUIRE", n) for n in names], refused)
        con.execute_command("RATELIMIT.DEBUG", "ADVANCE", 60000)
    con.execute_command("RATELIMIT.DEBUG", "REALCLOCK")


CASES = ["hot grant", "hot refusal", "random grant", "random refusal"]


def names(case, rng, n):
    if case == "hot grant":
        return ["hot:grant:1"] * n, granted
    if case == "hot refusal":
        return ["hot:refusal:1"] * n, refused
    if case == "random grant":
        return [f"api:user:{rng.randrange(USERS)}" for _ in range(n)], granted
    return [f"login:ip:{rng.randrange(USERS)}" for _ in range(n)], refused


def measure(con, case, on, rng, calls):
    con.execute_command("CONFIG", "SET", "ratelimit.stats", "yes" if on else "no")
    ns, check = names(case, rng, calls)
    cmds = [("RATELIMIT.TRYACQUIRE", n) for n in ns]
    pipe(con, cmds[:BATCH], check)  # warm
    con.execute_command("CONFIG", "RESETSTAT")
    t0 = time.perf_counter()
    pipe(con, cmds, check)
    wall = (time.perf_counter() - t0) / calls
    st = con.info("commandstats")["cmdstat_ratelimit.tryacquire"]
    assert st["calls"] == calls, st
    return st["usec"] / calls, wall


def timing(server, module, rounds):
    proc, con = start(server, module, tag="time")
    try:
        setup(con)
        print(f"time: {rounds} paired rounds of 20 000 calls, median of on/off ratios", flush=True)
        for case in CASES:
            rows = []
            for r in range(rounds):
                got = {}
                for on in ([True, False] if r % 2 == 0 else [False, True]):
                    got[on] = measure(con, case, on, random.Random(r), 20000)
                rows.append(got)
            cpu = statistics.median(g[True][0] / g[False][0] for g in rows)
            wall = statistics.median(g[True][1] / g[False][1] for g in rows)
            on_us = statistics.median(g[True][0] for g in rows)
            off_us = statistics.median(g[False][0] for g in rows)
            print(f"  {case:15} cpu on {on_us:.3f} us off {off_us:.3f} us  on/off cpu {cpu:.3f}"
                  f"  wall {wall:.3f}", flush=True)
    finally:
        proc.terminate(); proc.wait()


# The counting's own code: what `stats::decided` calls when ratelimit.stats is yes.
COUNTING = re.compile(r"^\s*([\d,]+) .*ratelimit::observe::count_(grant|refusal) \[")


def counting_instructions(path):
    """Instructions spent inside the counting per group and the sketch (inclusive), from one
    callgrind dump. The on/off difference of the totals also moves with the server's own work
    (an incremental rehash of its dict running in one phase and not the other moved it by 200
    to 350 instructions a call): this figure is the feature's cost alone."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                         capture_output=True, text=True).stdout
    return sum(int(m.group(1).replace(",", "")) for m in map(COUNTING.match, out.splitlines()) if m)


def callgrind_server(server, module, tag, functions):
    """A server of its own under callgrind, collecting inside `functions` only once told to:
    its dump folder, process, connection, and a callgrind_control runner."""
    d = f"/tmp/stats-bench/{tag}-{os.getpid()}"
    shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
    wrapper = (["valgrind", "--tool=callgrind", "--instr-atstart=no"]
               + [f"--toggle-collect={f}" for f in functions]
               + [f"--callgrind-out-file={d}/callgrind.out"])
    proc, con = start(server, module, wrapper, tag=tag)
    pid = str(proc.pid)
    ctl = lambda *a: subprocess.run(["callgrind_control", *a, pid], check=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return d, proc, con, ctl


def instructions(server, module):
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("instructions: skipped (no valgrind)")
        return
    d, proc, con, ctl = callgrind_server(server, module, "cg", [
        "RedisModuleCommandDispatcher", "ValkeyModuleCommandDispatcher"])
    calls = 2000
    try:
        setup(con)
        print("instructions per call inside the command (callgrind), on, off, off, on:", flush=True)
        rng = random.Random(7)
        for case in CASES:
            res = []
            for on in (True, False, False, True):
                con.execute_command("CONFIG", "SET", "ratelimit.stats", "yes" if on else "no")
                ns, check = names(case, rng, calls)
                cmds = [("RATELIMIT.TRYACQUIRE", n) for n in ns]
                pipe(con, cmds[:200], check)
                ctl("-i", "on")
                con.ping()
                before = set(glob.glob(f"{d}/callgrind.out*"))
                ctl("-z")
                pipe(con, cmds, check)
                ctl("-d")
                ctl("-i", "off")
                total, own = None, 0
                for f in glob.glob(f"{d}/callgrind.out*"):
                    if f in before:
                        continue
                    for line in open(f):
                        if line.startswith("totals:") or line.startswith("summary:"):
                            total = int(line.split()[1])
                    own += counting_instructions(f)
                res.append((total / calls, own / calls))
            on_ = (res[0][0] + res[3][0]) / 2
            off_ = (res[1][0] + res[2][0]) / 2
            own = (res[0][1] + res[3][1]) / 2
            print(f"  {case:15} on {on_:.0f} off {off_:.0f} on/off {on_ / off_:.4f}"
                  f" (+{on_ - off_:.0f}); the counting's own {own:.0f} = {own / off_:.2%} of off",
                  flush=True)
    finally:
        proc.terminate(); proc.wait()


def filter_cost(server, module):
    """What the module's command filter (how it sees CONFIG RESETSTAT) adds to every command
    the server runs, its own or not: callgrind inside processInputBuffer (parsing, lookup, the
    command, its reply) for plain GET and SET, and the part of it spent in the server's call of
    the module's filters."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        print("filter: skipped (no valgrind)")
        return
    d, proc, con, ctl = callgrind_server(server, module, "filter", ["processInputBuffer"])
    calls = 2000
    try:
        con.set("plain", "x")
        print("filter: instructions per plain command inside processInputBuffer (callgrind):",
              flush=True)
        for name, cmd in (("GET", ("GET", "plain")), ("SET", ("SET", "plain", "y"))):
            pipe(con, [cmd] * 200)
            ctl("-i", "on")
            before = set(glob.glob(f"{d}/callgrind.out*"))
            ctl("-z")
            pipe(con, [cmd] * calls)
            ctl("-d")
            ctl("-i", "off")
            for f in set(glob.glob(f"{d}/callgrind.out*")) - before:
                out = subprocess.run(["callgrind_annotate", "--inclusive=yes", f],
                                     capture_output=True, text=True).stdout
                total = filt = 0
                for line in out.splitlines():
                    m = re.match(r"^\s*([\d,]+) .*TOTALS", line)
                    if m:
                        total = int(m.group(1).replace(",", ""))
                    m = re.match(r"^\s*([\d,]+) .*:moduleCallCommandFilters \[", line)
                    if m:
                        filt = int(m.group(1).replace(",", ""))
                print(f"  {name:4} {total / calls:.0f} per command, of which the filter"
                      f" {filt / calls:.0f} ({filt / total:.2%})", flush=True)
    finally:
        proc.terminate(); proc.wait()


if __name__ == "__main__":
    server, module = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    phases = os.environ.get("PHASES", "time,instructions,filter").split(",")
    if "time" in phases:
        timing(server, module, rounds)
    if "instructions" in phases:
        instructions(server, module)
    if "filter" in phases:
        filter_cost(server, module)
