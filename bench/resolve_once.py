#!/usr/bin/env python3
"""Resolving a request once, measured: instructions per call inside the module's commands
(callgrind, toggled on the module command dispatcher) for each module build given, side by side:
ACQUIRE (without and with TICKET), CANCEL of a granted ticket and SETRATE KEEPSTATE with the
config cache off (`config-cache no`: each resolution a hash read and a parse), TRYACQUIRE and
ALLOW on one hot limiter and at random over N limiters with it on (the default), a refused
TRYACQUIRE on one hot limiter; and per waiter
served, WAITERS clients blocked in ACQUIRE on one limiter served in one pass (the module's timer
and the blocked clients' replies: callgrind toggled on `moduleTimerHandler` and
`moduleHandleBlockedClients`), config cache off and on.

  resolve_once.py SERVER BEFORE.so AFTER.so     (run with the examples venv's python: redis-py)

CALLS (2000) calls per phase, N (200000) limiters at random, WAITERS (200) waiters per round,
5 rounds. Repeatable to about 1%. Prints each build's figures, then a table side by side with
the last build's ratio to the first's."""
import glob, os, random, shutil, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config_cache as cc
import redis

CALLS = int(os.environ.get("CALLS", "2000"))
N = int(os.environ.get("N", "200000"))

WAITERS = int(os.environ.get("WAITERS", "200"))
ROUNDS = 5

COMMANDS = ["RedisModuleCommandDispatcher"]
SERVING = ["moduleTimerHandler", "moduleHandleBlockedClients"]

def run(server, module, cache, cases, toggles=COMMANDS):
    d = f"/tmp/resolve_once/cg-{os.getpid()}-{cache}"
    shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
    wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               *[f"--toggle-collect={f}" for f in toggles],
               f"--callgrind-out-file={d}/callgrind.out"]
    port = cc.free_port()
    argv = wrapper + [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no", "--dir", d, "--logfile", f"{d}/log",
                      "--loadmodule", module, "debug-commands", "yes", "config-cache", cache]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    con = redis.Redis(port=port, socket_timeout=600)
    for _ in range(600):
        try:
            con.ping(); break
        except Exception:
            time.sleep(0.2)
    pid = str(proc.pid)
    ctl = lambda *a: subprocess.run(["callgrind_control", *a, pid], check=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = {}
    try:
        con.execute_command("RATELIMIT.DEBUG", "SETCLOCK", 1767225600000)
        for name, setup, calls in cases(con, ctl):
            setup()
            ctl("-i", "on"); con.ping()
            before = set(glob.glob(f"{d}/callgrind.out*"))
            ctl("-z")
            if callable(calls):
                # A phase of its own: returns how many units it measured, and a sample reply.
                units, replies = calls()
            else:
                p = con.pipeline(transaction=False)
                for c in calls:
                    p.execute_command(*c)
                replies = p.execute(raise_on_error=True)
                units = len(calls)
            ctl("-d"); ctl("-i", "off")
            total = 0
            for f in glob.glob(f"{d}/callgrind.out*"):
                if f in before:
                    continue
                for line in open(f):
                    if line.startswith("totals:") or line.startswith("summary:"):
                        total = int(line.split()[1])
            out[name] = total / units
            print(f"  {name}: {out[name]:.0f}  (reply {replies[0]!r})", flush=True)
    finally:
        proc.terminate(); proc.wait()
    return out

def off_cases(con, _ctl):
    def acq():
        con.execute_command("RATELIMIT.SETRATE", "a", 1000000000, 60000, "PRECISION", 60000)
        for i in range(200):
            con.execute_command("RATELIMIT.ACQUIRE", "a")
    yield "ACQUIRE", acq, [("RATELIMIT.ACQUIRE", "a")] * CALLS
    yield "ACQUIRE TICKET", lambda: None, [("RATELIMIT.ACQUIRE", "a", "TICKET", f"t{i}") for i in range(CALLS)]
    yield "CANCEL (a granted ticket)", lambda: None, [("RATELIMIT.CANCEL", "a", f"t{i}") for i in range(CALLS)]
    def ks():
        con.execute_command("RATELIMIT.SETRATE", "k", 100000, 60000)
        for i in range(100):
            con.execute_command("RATELIMIT.TRYACQUIRE", "k")
            con.execute_command("RATELIMIT.DEBUG", "ADVANCE", 1)
    yield "SETRATE KEEPSTATE", ks, [("RATELIMIT.SETRATE", "k", 100000 + (i % 2), 60000, "KEEPSTATE") for i in range(CALLS)]

def on_cases(con, _ctl):
    def hot():
        con.execute_command("RATELIMIT.SETRATE", "h", 1000000000, 60000, "PRECISION", 60000)
        for i in range(2000):
            con.execute_command("RATELIMIT.TRYACQUIRE", "h")
    yield "TRYACQUIRE hot", hot, [("RATELIMIT.TRYACQUIRE", "h")] * CALLS
    yield "ALLOW hot", lambda: None, [("RATELIMIT.ALLOW", "h")] * CALLS
    # A refusal: counted in INFO and, with ratelimit.stats yes, per group and in the sketch.
    def full():
        con.execute_command("RATELIMIT.SETRATE", "r", 1, 60000)
        con.execute_command("RATELIMIT.TRYACQUIRE", "r")
    yield "TRYACQUIRE refused, hot", full, [("RATELIMIT.TRYACQUIRE", "r")] * CALLS
    rng = random.Random(7)
    def many():
        for s in range(0, N, 1000):
            p = con.pipeline(transaction=False)
            for i in range(s, min(N, s + 1000)):
                p.execute_command("RATELIMIT.SETRATE", f"u:{i}", 1000000, 60000, "PRECISION", 1000)
            p.execute()
        for s in range(0, 4 * CALLS, 1000):
            p = con.pipeline(transaction=False)
            for _ in range(1000):
                p.execute_command("RATELIMIT.TRYACQUIRE", f"u:{rng.randrange(N)}")
            p.execute()
    yield f"TRYACQUIRE {N} random", many, [("RATELIMIT.TRYACQUIRE", f"u:{rng.randrange(N)}") for _ in range(CALLS)]
    yield f"ALLOW {N} random", lambda: None, [("RATELIMIT.ALLOW", f"u:{rng.randrange(N)}") for _ in range(CALLS)]

def waiter_cases(con, ctl):
    """WAITERS clients blocked in ACQUIRE on limiter `w` (WAITERS per 60 s, all taken), served
    in one pass when the debug clock moves 60 s, ROUNDS times: the instructions of the module's
    timer (serving) and of the blocked clients' replies, over the waiters served. The
    instrumentation is off while they block (their ACQUIREs are not the figure)."""
    port = con.connection_pool.connection_kwargs["port"]
    conns = [redis.Connection(port=port, socket_timeout=600) for _ in range(WAITERS)]
    def setup():
        con.execute_command("RATELIMIT.SETRATE", "w", WAITERS, 60000)
        con.execute_command("RATELIMIT.TRYACQUIRE", "w", WAITERS)
    def block_all():
        for c in conns:
            c.send_command("RATELIMIT.ACQUIRE", "w")
        for _ in range(6000):
            if con.info("ratelimit").get("ratelimit_blocked_clients") == WAITERS:
                return
            time.sleep(0.05)
        raise SystemExit("the waiters did not all block")
    def serve_all():
        replies = []
        for _ in range(ROUNDS):
            ctl("-i", "off")
            block_all()
            ctl("-i", "on")
            con.execute_command("RATELIMIT.DEBUG", "ADVANCE", 60000)
            replies = [c.read_response() for c in conns]
            assert all(r is None for r in replies), replies[:3]
        return WAITERS * ROUNDS, replies
    yield "served waiter", setup, serve_all

if __name__ == "__main__":
    server = sys.argv[1]
    results = {}
    for module in sys.argv[2:]:
        print(module, flush=True)
        figures = {}
        figures.update({f"{k}, config cache off": v for k, v in run(server, module, "no", off_cases).items()})
        figures.update(run(server, module, "yes", on_cases))
        for cache, setting in (("no", "off"), ("yes", "on")):
            waiters = run(server, module, cache, waiter_cases, toggles=SERVING)
            figures.update({f"{k}, config cache {setting}": v for k, v in waiters.items()})
        results[module] = figures
    modules = list(results)
    names = [os.path.basename(m).removesuffix(".so") for m in modules]
    names[-1] = "this tree"
    ratios = [f"this tree / {n}" for n in names[:-1]]
    print()
    print("| call | " + " | ".join(names + ratios) + " |")
    print("|---|" + "---:|" * (len(names) + len(ratios)))
    for name in results[modules[0]]:
        row = [results[m].get(name) for m in modules]
        cells = [f"{v:,.0f}".replace(",", " ") if v else "-" for v in row]
        cells += [f"{row[-1] / v:.2f}" if v and row[-1] else "-" for v in row[:-1]]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
