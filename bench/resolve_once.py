#!/usr/bin/env python3
"""Resolving a request once, measured: instructions per call inside the module's commands
(callgrind, toggled on the module command dispatcher) for each module build given, side by side:
ACQUIRE (without and with TICKET), CANCEL of a granted ticket and SETRATE KEEPSTATE with the
config cache off (`config-cache no`: each resolution a hash read and a parse), TRYACQUIRE and
ALLOW on one hot limiter and at random over N limiters with it on (the default).

  resolve_once.py SERVER BEFORE.so AFTER.so     (run with the examples venv's python: redis-py)

CALLS (2000) calls per phase, N (200000) limiters at random. Repeatable to about 1%."""
import glob, os, random, shutil, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config_cache as cc
import redis

CALLS = int(os.environ.get("CALLS", "2000"))
N = int(os.environ.get("N", "200000"))

def run(server, module, cache, cases):
    d = f"/tmp/resolve_once/cg-{os.getpid()}-{cache}"
    shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
    wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               "--toggle-collect=RedisModuleCommandDispatcher",
               f"--callgrind-out-file={d}/callgrind.out"]
    port = cc.free_port()
    argv = wrapper + [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no", "--dir", d, "--logfile", f"{d}/log",
                      "--loadmodule", module, "debug-commands", "yes", "config-cache", cache]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    con = redis.Redis(port=port, socket_timeout=600)
    import time
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
        for name, setup, calls in cases(con):
            setup()
            ctl("-i", "on"); con.ping()
            before = set(glob.glob(f"{d}/callgrind.out*"))
            ctl("-z")
            p = con.pipeline(transaction=False)
            for c in calls:
                p.execute_command(*c)
            replies = p.execute(raise_on_error=True)
            ctl("-d"); ctl("-i", "off")
            total = 0
            for f in glob.glob(f"{d}/callgrind.out*"):
                if f in before:
                    continue
                for line in open(f):
                    if line.startswith("totals:") or line.startswith("summary:"):
                        total = int(line.split()[1])
            out[name] = total / len(calls)
            print(f"  {name}: {out[name]:.0f}  (reply {replies[0]!r})", flush=True)
    finally:
        proc.terminate(); proc.wait()
    return out

def off_cases(con):
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

def on_cases(con):
    def hot():
        con.execute_command("RATELIMIT.SETRATE", "h", 1000000000, 60000, "PRECISION", 60000)
        for i in range(2000):
            con.execute_command("RATELIMIT.TRYACQUIRE", "h")
    yield "TRYACQUIRE hot", hot, [("RATELIMIT.TRYACQUIRE", "h")] * CALLS
    yield "ALLOW hot", lambda: None, [("RATELIMIT.ALLOW", "h")] * CALLS
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

if __name__ == "__main__":
    server = sys.argv[1]
    for module in sys.argv[2:]:
        print(module, flush=True)
        run(server, module, "no", off_cases)
        run(server, module, "yes", on_cases)
