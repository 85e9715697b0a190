#!/usr/bin/env python3
"""The config cache against `config-cache no`: TRYACQUIRE's cost with the cache on and off, on
one busy limiter (a grant, a refusal) and on 500, 1 000 and 10 000 limiters at random, also held
in use (`RATELIMIT.DEBUG CONFIGCACHE ALWAYS`). The rows of docs/performance.md's config cache
table marked "callgrind, a server of its own" and "two servers" (`make bench-config-cache`).

  config_cache.py cg   SERVER MODULE.so                 instructions per call in the module's
                                                        commands (callgrind): on, off, off, on
  config_cache.py wall SERVER BASE.so NEW.so [rounds]   two servers side by side, paired rounds,
                                                        CPU time per call (INFO commandstats)

SIZES=500,1000,10000 (the default) picks the sizes. Each phase first reads the limiters it will
call (AVAILABLE), so the cache holds what it would hold in steady use; the limiters' logs grow
from one phase to the next, so the rows at random move by a few hundredths from run to run.
"""
import os, random, socket, statistics, subprocess, sys, time, glob, shutil
import redis

CALLS = 20000
BATCH = 1000
SIZES = [500, 1000, 10000]
PRIMER = 40000


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def start(server, module, wrapper=None, tag="x"):
    port = free_port()
    d = f"/tmp/cc/run-{tag}-{port}"
    os.makedirs(d, exist_ok=True)
    argv = (wrapper or []) + [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", d, "--logfile", f"{d}/log",
                              "--enable-debug-command", "local",
                              "--loadmodule", module, "debug-commands", "yes"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    con = redis.Redis(port=port, socket_timeout=600)
    for _ in range(600):
        try:
            con.ping(); break
        except Exception:
            time.sleep(0.2)
    return proc, con


def setup_hot(con):
    con.execute_command("RATELIMIT.SETRATE", "hot:grant", 1000000000, 60000, "PRECISION", 60000)
    con.execute_command("RATELIMIT.SETRATE", "hot:refusal", 1, 86400000)
    assert con.execute_command("RATELIMIT.TRYACQUIRE", "hot:refusal") is None


def setup(con, nusers):
    # As the bench's create(): fewer than 10 000 users get more permits, PRECISION 1000
    # (SETRATE), then every user its first ALLOW.
    if nusers < 10000:
        for start_ in range(0, nusers, BATCH):
            p = con.pipeline(transaction=False)
            for i in range(start_, min(nusers, start_ + BATCH)):
                p.execute_command("RATELIMIT.SETRATE", f"u:{i}", 1000000 // nusers, 60000,
                                  "KEEPALIVE", 3600000, "PRECISION", 1000)
            p.execute()
    for start_ in range(0, nusers, BATCH):
        p = con.pipeline(transaction=False)
        for i in range(start_, min(nusers, start_ + BATCH)):
            p.execute_command("RATELIMIT.ALLOW", f"u:{i}", "RATE", 100, 60000,
                              "KEEPALIVE", 3600000)
        p.execute()


def settle(con):
    for _ in range(600):
        st = con.execute_command("DEBUG", "HTSTATS", 0)
        st = st.decode() if isinstance(st, bytes) else str(st)
        if "rehashing target" not in st:
            return
        time.sleep(0.1)


def drive(con, names, cmd="RATELIMIT.TRYACQUIRE", check=None):
    for s in range(0, len(names), BATCH):
        p = con.pipeline(transaction=False)
        for n in names[s:s + BATCH]:
            p.execute_command(cmd, n)
        for r in p.execute():
            if check is not None:
                check(r)


def granted(r):
    assert r is None, r


def refused(r):
    assert isinstance(r, int) and r > 0, r


def case_names(case, rng, n):
    if case == "grant":
        return ["hot:grant"] * n, granted
    if case == "refusal":
        return ["hot:refusal"] * n, refused
    users = int(case.rstrip("h"))
    return [f"u:{rng.randrange(users)}" for _ in range(n)], granted


def prepare(con, case, on, rng, primer):
    con.execute_command("CONFIG", "SET", "ratelimit.config-cache", "yes" if on else "no")
    con.execute_command("RATELIMIT.DEBUG", "CONFIGCACHE", "ALWAYS" if case.endswith("h") else "AUTO")
    names, _ = case_names(case, rng, primer)
    drive(con, names, "RATELIMIT.AVAILABLE")


def usec(con, case, on, rng, calls=CALLS):
    primer = min(4 * int(case.rstrip("h")), PRIMER) if case not in ("grant", "refusal") else 2000
    prepare(con, case, on, rng, primer)
    names, check = case_names(case, rng, calls)
    con.execute_command("CONFIG", "RESETSTAT")
    drive(con, names, check=check)
    st = con.info("commandstats")["cmdstat_ratelimit.tryacquire"]
    assert st["calls"] == calls, st
    return st["usec"] / st["calls"]




def cases_of(size):
    held = [f"{size}h"] if size <= 2000 else []
    return [str(size)] + held + (["grant", "refusal"] if size == 500 else [])


def wall(server, base, new, rounds, sizes):
    for size in sizes:
        (pa, a), (pb, b) = start(server, base, tag="base"), start(server, new, tag="new")
        try:
            for c in (a, b):
                setup(c, size)
                settle(c)
            for case in cases_of(size):
                if case == "grant":
                    for c in (a, b):
                        setup_hot(c)
                rows = []
                for r in range(rounds):
                    order = [("base", a), ("new", b)] if r % 2 == 0 else [("new", b), ("base", a)]
                    got = {}
                    for name, con in order:
                        rng = random.Random(1000 * r + len(case))
                        flags = [True, False] if r % 4 < 2 else [False, True]
                        for on in flags:
                            got[(name, on)] = usec(con, case, on, rng)
                    rows.append(got)
                ratio = lambda f: statistics.median(f(g) for g in rows)
                res = {
                    "base on/off": ratio(lambda g: g[("base", True)] / g[("base", False)]),
                    "new on/off": ratio(lambda g: g[("new", True)] / g[("new", False)]),
                    "new/base on": ratio(lambda g: g[("new", True)] / g[("base", True)]),
                    "new/base off": ratio(lambda g: g[("new", False)] / g[("base", False)]),
                    "base on": statistics.median(g[("base", True)] for g in rows),
                    "new on": statistics.median(g[("new", True)] for g in rows),
                }
                print(case, " ".join(f"{k}={v:.3f}" for k, v in res.items()), flush=True)
            for name, con in (("base", a), ("new", b)):
                print(" ", name, "hpttl:", con.info("commandstats").get("cmdstat_hpttl", {}).get("calls", 0),
                      "in use:", con.info("ratelimit").get("ratelimit_configs_in_use"),
                      "kept:", con.info("ratelimit").get("ratelimit_configs_kept"), flush=True)
        finally:
            pa.terminate(); pb.terminate(); pa.wait(); pb.wait()


def cg(server, module, sizes):
    for size in sizes:
        cg_size(server, module, size)


def cg_size(server, module, size):
    d = f"/tmp/cc/cg-{os.getpid()}"
    shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
    wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               "--toggle-collect=RedisModuleCommandDispatcher",
               "--toggle-collect=ValkeyModuleCommandDispatcher",
               f"--callgrind-out-file={d}/callgrind.out"]
    proc, con = start(server, module, wrapper, tag="cg")
    pid = str(proc.pid)
    ctl = lambda *a: subprocess.run(["callgrind_control", *a, pid], check=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        setup(con, size)
        settle(con)
        rng = random.Random(7)
        calls = 2000
        for case in cases_of(size):
            if case == "grant":
                setup_hot(con)
            res = []
            inuse = []
            for on in (True, False, False, True):
                primer = min(4 * int(case.rstrip("h")), 40000) if case not in ("grant", "refusal") else 2000
                prepare(con, case, on, rng, primer)
                names, check = case_names(case, rng, calls)
                ctl("-i", "on")
                con.ping()
                before = set(glob.glob(f"{d}/callgrind.out*"))
                ctl("-z")
                drive(con, names, check=check)
                ctl("-d")
                ctl("-i", "off")
                dump = [f for f in glob.glob(f"{d}/callgrind.out*") if f not in before]
                total = None
                for f in dump:
                    for line in open(f):
                        if line.startswith("totals:") or line.startswith("summary:"):
                            total = int(line.split()[1])
                res.append(total / calls)
                if on:
                    inuse.append(con.info("ratelimit").get("ratelimit_configs_in_use"))
            on_, off_ = (res[0] + res[3]) / 2, (res[1] + res[2]) / 2
            print(f"{case}: on {on_:.0f} off {off_:.0f} on/off {on_/off_:.3f} "
                  f"(on {res[0]:.0f},{res[3]:.0f} off {res[1]:.0f},{res[2]:.0f}; in use {inuse})",
                  flush=True)
        print("  hpttl calls:", con.info("commandstats").get("cmdstat_hpttl", {}).get("calls", 0), flush=True)
    finally:
        proc.terminate(); proc.wait()


if __name__ == "__main__":
    sizes = [int(x) for x in os.environ.get("SIZES", "500,1000,10000").split(",")]
    if sys.argv[1] == "wall":
        wall(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 6, sizes)
    else:
        cg(sys.argv[2], sys.argv[3], sizes)
