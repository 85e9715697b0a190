#!/usr/bin/env python3
"""The ONEKEY form against the three-key form, the module's GCRA and the scripts users run
today, side by side on one server in one run (`make bench-onekey`; also run by `make bench`).

  onekey.py SERVER MODULE.so         (the python venv of `make test-python`: redis-py and limits)

Contenders, each on keys of its own in database 0:
- onekey:   RATELIMIT.ALLOW key RATE 100 60000 ONEKEY KEEPALIVE 60000 (default precision 1 s);
- try:      RATELIMIT.TRYACQUIRE with the same arguments: the same decision and write, with a
            one-value reply (nil or the wait) where ALLOW names five fields; read beside GCRA
            (whose reply is five integers) it tells the decision's cost from ALLOW's reply's
            (part 2 only);
- made:     RATELIMIT.ALLOW key alone, on a ONEKEY limiter made once by RATELIMIT.SETRATE key 100
            60000 ONEKEY KEEPALIVE 60000: how a busy shared limiter is called when it is
            configured once (hot key only, parts 1 and 2); beside onekey it tells what sending
            RATE ... KEEPALIVE on every call costs (six more arguments to read and parse);
- three:    the same without ONEKEY: Redisson's hash, value and permits zset (precision 1 ms);
- gcra:     the module's GCRA key 99 100 60;
- fixed:    rate-limit-redis's fixed-window script (PTTL, INCR or SET PX: one key), read at run
            time from node/node_modules (the node package's `npm ci`), sent as its RedisStore
            sends it (EVALSHA sha 1 key windowMs);
- redisson: bench/tryacquire.lua, this project's port of the script Redisson's RRateLimiter
            sends (the same calls on the same keys and bytes), with the caller's clock and a
            fresh 16-byte id, as Redisson sends them; its limiter made as trySetRate makes it,
            without a keepAlive (Redisson's default: its keys never expire, so none expires
            mid-run and answers "not initialized"; without one the script runs one PTTL where
            with one it runs three PEXPIREs, so its figure is if anything low);
- limits:   the `limits` package's moving window (its acquire_moving_window.lua: a list of
            timestamps), read at run time from the installed package, sent as its RedisStorage
            sends it (EVALSHA sha 1 key timestamp limit expiry amount).
No third-party code is stored in this repository: the scripts are read where their packages are
installed.

Parts (PARTS=cpu,instructions,memory,profile picks):
1. cpu: server CPU per call on one hot key and on SIZES keys (200 000 and 1 000 000) called at
   random, the real clock; the limits contender is left out (the issue's five are measured).
   Before the rounds of a size every contender's N keys are made in the server, each holding
   the state its first call leaves (one made by the contender's own call, then COPYed; see
   create_limiters), except GCRA's (a GCRA key of this limit expires 0.6 s after its call: at
   random, every GCRA call creates its key, as it would in production). ROUNDS rounds of CALLS
   pipelined calls per contender, the order rotated each round, every reply checked. Two
   figures: INFO commandstats usec / calls (wall time in the command) and the main thread's
   CPU (INFO cpu) across the phase / calls (whole server, preemption left out: the one to read
   on a loaded machine). Medians of the rounds, and of each round's onekey/contender ratio,
   with the middle half of those ratios on the main thread (a round's reading moves by a
   quarter or more on a shared VM: a target within that of its median is not settled by one
   run).
2. instructions: a server of its own under callgrind (collecting only inside the module's
   command dispatcher and EVALSHA), the same hot key and SIZES_CG (20 000) keys at random,
   CG_CALLS (2 000) calls per contender: instructions per call inside the command.
3. memory: the same server as part 1, on the module's debug clock (RATELIMIT.DEBUG SETCLOCK,
   ADVANCE): MEM_KEYS (2 000) limiters of 100 a minute each given E grants spread evenly over the window
   (1, 10, 50, 100); MEMORY USAGE ... SAMPLES 0 of one limiter's keys, and used_memory grown
   per limiter. Then ONEKEY at rates up to 1 000 000 a minute with a grant every 100 ms for two
   windows: its size stays bounded by interval / precision.
4. profile: callgrind_annotate of the ONEKEY at-random dump (part 2): the top functions by their
   own instructions; and, when `perf` may record the server, `perf record` of the ONEKEY
   at-random calls on the part-1 server.
"""
import glob, json, os, random, re, shutil, socket, statistics, subprocess, sys, time
import redis

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BATCH = 1000
CALLS = int(os.environ.get("CALLS", "20000"))
ROUNDS = int(os.environ.get("ROUNDS", "11"))
SIZES = [int(x) for x in os.environ.get("SIZES", "200000,1000000").split(",") if x]
SIZES_CG = [int(x) for x in os.environ.get("SIZES_CG", "20000").split(",") if x]
CG_CALLS = int(os.environ.get("CG_CALLS", "2000"))
# CG_WHO=onekey,gcra picks part 2's contenders; CG_CACHE=1 simulates the caches too and adds a
# table of estimated cycles (Ir + 10 x L1 misses + 100 x last-level misses, callgrind_annotate's
# estimate; CG_LL=size,ways,line the last level, 32 MiB by default): what a cold key's misses
# cost, counted as steadily as the instructions.
CG_WHO = [w for w in os.environ.get("CG_WHO", "").split(",") if w]
CG_CACHE = os.environ.get("CG_CACHE", "") == "1"
MEM_KEYS = int(os.environ.get("MEM_KEYS", "2000"))
PARTS = os.environ.get("PARTS", "cpu,instructions,memory,profile").split(",")
RATE, INTERVAL, KEEPALIVE = 100, 60000, 60000
# Part 3's debug clock starts an hour after the server's real clock: the keys' expiry times
# (PXAT, PX) are real times, and every limiter must outlive its case whatever the machine's speed.
AHEAD = 3600000
LIVE_UNTIL_CALLED = 1800000  # part 1's copied limiters: 30 minutes, until their first call
RESULTS = os.path.join(HERE, "results")


# ---------------------------------------------------------------- the scripts, read at run time

def fixed_window_script():
    """rate-limit-redis's increment script, exactly as its RedisStore loads it: its own code
    runs (node), with a sendCommand that records the SCRIPT LOAD instead of sending it."""
    pkg = os.path.join(ROOT, "node", "node_modules", "rate-limit-redis")
    if not os.path.isdir(pkg):
        sys.exit(f"onekey: {pkg} is missing: run `make deps-node`")
    js = r"""
const { RedisStore } = require(process.argv[1]);
const loaded = [];
const store = new RedisStore({ sendCommand: async (...args) => {
  if (args[0] === 'SCRIPT' && args[1] === 'LOAD') loaded.push(args[2]);
  return 'sha';
} });
Promise.resolve(store.init({ windowMs: 60000 })).then(() => {
  const version = require(process.argv[1] + '/package.json').version;
  process.stdout.write(JSON.stringify({ version, increment: loaded[0] }));
});
"""
    out = subprocess.run(["node", "-e", js, pkg], check=True, capture_output=True, text=True)
    got = json.loads(out.stdout)
    assert "INCR" in got["increment"] and "PTTL" in got["increment"], got
    return got["increment"], f"rate-limit-redis {got['version']}"


def limits_script():
    import limits
    path = os.path.join(os.path.dirname(limits.__file__), "resources", "redis", "lua_scripts",
                        "acquire_moving_window.lua")
    return open(path).read(), f"limits {limits.__version__}"


def redisson_script():
    return open(os.path.join(HERE, "tryacquire.lua")).read(), "bench/tryacquire.lua"


def as_function(script):
    """A script's text as a local Lua function of (KEYS, ARGV), so a loop in one EVAL can run it
    many times (its `return` returns from the function)."""
    return "local function body(KEYS, ARGV)\n" + script + "\nend\n"


# ---------------------------------------------------------------- the server

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def start(server, module, wrapper=None, tag="x"):
    port = free_port()
    d = f"/tmp/onekey-bench/run-{tag}-{port}"
    shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
    argv = (wrapper or []) + [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", d, "--logfile", f"{d}/log",
                              "--enable-debug-command", "local", "--lua-time-limit", "0",
                              "--loadmodule", module, "debug-commands", "yes"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    con = redis.Redis(port=port, socket_timeout=3600, protocol=2)  # RESP2, as most clients
    for _ in range(1200):
        try:
            con.ping(); break
        except Exception:
            if proc.poll() is not None:
                sys.exit(f"onekey: the server exited: see {d}/log")
            time.sleep(0.2)
    return proc, con, d


def settle(con):
    """Waits until no key table is being rehashed (a table being grown makes every lookup probe
    two tables and every command move buckets, which would fall on whatever is measured next)."""
    for _ in range(600):
        st = con.execute_command("DEBUG", "HTSTATS", 0)
        st = st.decode() if isinstance(st, bytes) else str(st)
        if "rehashing target" not in st:
            return
        time.sleep(0.1)


def pipe(con, commands, check):
    for s in range(0, len(commands), BATCH):
        p = con.pipeline(transaction=False)
        for c in commands[s:s + BATCH]:
            p.execute_command(*c)
        for r in p.execute(raise_on_error=False):
            check(r)


# ---------------------------------------------------------------- the contenders

def rs_keys(name):
    return [name, f"{{{name}}}:value", f"{{{name}}}:value:c", f"{{{name}}}:permits",
            f"{{{name}}}:permits:c"]


class Contenders:
    ORDER = ["onekey", "try", "three", "gcra", "fixed", "redisson", "limits"]
    # Part 1 measures the five (and, on the hot key, HOT_ONLY); part 2 adds TRYACQUIRE
    # ONEKEY (by instructions only: its keys would make part 1's million-key table cross a power
    # of two, and the rehash that follows would be measured); limits' moving window is in the
    # memory tables.
    CPU = ["onekey", "three", "gcra", "fixed", "redisson"]
    CG = CG_WHO or ["onekey", "try", "three", "gcra", "fixed", "redisson"]
    # Measured on the hot key only: a limiter configured once is a shared one, not one per user.
    HOT_ONLY = ["made"]
    LABEL = {
        "onekey": "ALLOW ... ONEKEY (one key)",
        "try": "TRYACQUIRE ... ONEKEY (one key, one-value reply)",
        "made": "ALLOW key, ONEKEY made once by SETRATE",
        "three": "ALLOW (three keys)",
        "gcra": "GCRA key 99 100 60",
        "fixed": "rate-limit-redis fixed window",
        "redisson": "Redisson RRateLimiter script",
        "limits": "limits moving window",
    }
    PREFIX = {"onekey": "ok:", "try": "to:", "made": "om:", "three": "tk:", "gcra": "g:", "fixed": "fw:", "redisson": "rs:",
              "limits": "lm:"}
    STAT = {"onekey": "ratelimit.allow", "try": "ratelimit.tryacquire", "made": "ratelimit.allow", "three": "ratelimit.allow", "gcra": "gcra",
            "fixed": "evalsha", "redisson": "evalsha", "limits": "evalsha"}

    def __init__(self, con):
        self.fixed_src, self.fixed_from = fixed_window_script()
        self.redisson_src, self.redisson_from = redisson_script()
        self.limits_src, self.limits_from = limits_script()
        self.load(con)
        self.ids = random.Random(29)

    def load(self, con):
        self.sha = {
            "fixed": con.script_load(self.fixed_src),
            "redisson": con.script_load(self.redisson_src),
            "limits": con.script_load(self.limits_src),
        }

    def command(self, who, name, now_ms):
        if who == "onekey":
            return ("RATELIMIT.ALLOW", name, "RATE", RATE, INTERVAL, "ONEKEY", "KEEPALIVE",
                    KEEPALIVE)
        if who == "try":
            return ("RATELIMIT.TRYACQUIRE", name, "RATE", RATE, INTERVAL, "ONEKEY", "KEEPALIVE",
                    KEEPALIVE)
        if who == "made":
            return ("RATELIMIT.ALLOW", name)
        if who == "three":
            return ("RATELIMIT.ALLOW", name, "RATE", RATE, INTERVAL, "KEEPALIVE", KEEPALIVE)
        if who == "gcra":
            return ("GCRA", name, RATE - 1, RATE, INTERVAL // 1000)
        if who == "fixed":
            return ("EVALSHA", self.sha["fixed"], 1, name, INTERVAL)
        if who == "redisson":
            return ("EVALSHA", self.sha["redisson"], 5, *rs_keys(name), 1, now_ms,
                    self.ids.randbytes(16))
        return ("EVALSHA", self.sha["limits"], 1, name, repr(now_ms / 1000), RATE,
                INTERVAL // 1000, 1)

    @staticmethod
    def check(who):
        """Each contender's reply, checked for its shape; returns 1 for a grant, 0 a refusal."""
        def allow(r):
            if isinstance(r, dict):
                r = [x for kv in r.items() for x in kv]
            assert isinstance(r, list) and len(r) == 10 and r[0] in (b"allowed", "allowed"), r
            return 1 if r[1] == 1 else 0

        def tryacquire(r):
            assert r is None or (isinstance(r, int) and r > 0), r
            return 1 if r is None else 0

        def gcra(r):
            assert isinstance(r, list) and len(r) == 5, r
            return 1 if r[0] == 0 else 0

        def fixed(r):
            assert isinstance(r, list) and len(r) == 2 and r[0] >= 1, r
            return 1 if r[0] <= RATE else 0

        def redisson(r):
            assert r is None or (isinstance(r, int) and r > 0), r
            return 1 if r is None else 0

        def limits(r):
            assert r in (1, None), r
            return 1 if r == 1 else 0
        return {"onekey": allow, "try": tryacquire, "made": allow, "three": allow, "gcra": gcra, "fixed": fixed,
                "redisson": redisson, "limits": limits}[who]

    def populate_script(self, who):
        """A Lua loop making contender `who`'s call once on each of keys from..to, in the
        server (ARGV: prefix, from, to, now in ms). Returns the grants."""
        head = "local p, a, b, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
        if who in ("onekey", "three"):
            extra = "'ONEKEY', " if who == "onekey" else ""
            return head + f"""local n = 0
for i = a, b do
  local r = redis.call('RATELIMIT.ALLOW', p .. i, 'RATE', {RATE}, {INTERVAL}, {extra}'KEEPALIVE', {KEEPALIVE})
  n = n + r[2]
end
return n"""
        if who == "try":
            return head + f"""local n = 0
for i = a, b do
  local r = redis.call('RATELIMIT.TRYACQUIRE', p .. i, 'RATE', {RATE}, {INTERVAL}, 'ONEKEY', 'KEEPALIVE', {KEEPALIVE})
  if not r then n = n + 1 end
end
return n"""
        if who == "gcra":
            return head + f"""local n = 0
for i = a, b do
  local r = redis.call('GCRA', p .. i, {RATE - 1}, {RATE}, {INTERVAL // 1000})
  if r[1] == 0 then n = n + 1 end
end
return n"""
        if who == "fixed":
            return as_function(self.fixed_src) + head + f"""local n = 0
for i = a, b do
  local r = body({{p .. i}}, {{'{INTERVAL}'}})
  if r[1] <= {RATE} then n = n + 1 end
end
return n"""
        if who == "redisson":
            # Redisson's trySetRate (the module's SETRATE writes the same hash), then its script.
            return as_function(self.redisson_src) + head + f"""local n = 0
for i = a, b do
  local k = p .. i
  if redis.call('EXISTS', k) == 0 then
    redis.call('RATELIMIT.SETRATE', k, {RATE}, {INTERVAL})
  end
  local r = body({{k, '{{' .. k .. '}}:value', '{{' .. k .. '}}:value:c', '{{' .. k .. '}}:permits', '{{' .. k .. '}}:permits:c'}},
                 {{'1', tostring(now), string.format('%08x%08x', i, now % 4294967296)}})
  if r == nil then n = n + 1 end
end
return n"""
        return as_function(self.limits_src) + head + f"""local n = 0
for i = a, b do
  local r = body({{p .. i}}, {{tostring(now / 1000), '{RATE}', '{INTERVAL // 1000}', '1'}})
  if r then n = n + 1 end
end
return n"""


def now_ms(con):
    s, us = con.time()
    return s * 1000 + us // 1000


COPY_LUA = """local tpl, p, a, b, three = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'
for i = a, b do
  local k = p .. i
  redis.call('COPY', tpl, k)
  if three then
    redis.call('COPY', '{' .. tpl .. '}:value', '{' .. k .. '}:value')
    redis.call('COPY', '{' .. tpl .. '}:permits', '{' .. k .. '}:permits')
  end
end
return b - a + 1"""


# A ONEKEY contender's keys are each made by its own call, not copied: a state holds an epoch
# drawn when it is made, so no two limiters hold the same bytes, and the module keeps a state
# decoded twice in a row (a hot limiter's next call compares the bytes instead of decoding them).
# Copies of one state would all hit it, as no two users' limiters do.
OWN_CALL_LUA = """local p, a, b, command = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
for i = a, b do
  local k = p .. i
  redis.call(command, k, 'RATE', %d, %d, 'ONEKEY', 'KEEPALIVE', %d)
  redis.call('PEXPIRE', k, %d)
end
return b - a + 1""" % (RATE, INTERVAL, KEEPALIVE, LIVE_UNTIL_CALLED)
OWN_CALL = {"onekey": "RATELIMIT.ALLOW", "try": "RATELIMIT.TRYACQUIRE"}


def create_limiters(con, c, who_list, n, chunk=50000):
    """Every contender's n keys, each holding the state its first call leaves: one limiter made
    by the contender's own call, then COPYed in the server (four to ten times cheaper than the
    calls), except ONEKEY's, each made by its own call (see OWN_CALL_LUA: four to ten times
    slower, and its grants spread over the making rather than all at one time). COPY keeps the TTL,
    and the template's is first set to LIVE_UNTIL_CALLED, as each ONEKEY key's is: a key whose
    minute ran out while a million others were made would be measured as a first use."""
    sha = con.script_load(COPY_LUA)
    own = con.script_load(OWN_CALL_LUA)
    t = time.perf_counter()
    tpl = {}
    for who in who_list:
        if who in OWN_CALL:
            continue
        lua = con.script_load(c.populate_script(who))
        assert con.evalsha(lua, 0, c.PREFIX[who] + "tpl", 0, 0, now_ms(con)) == 1, who
        tpl[who] = c.PREFIX[who] + "tpl0"
        # The copies live until their first measured call, which gives each its own TTL (the
        # limiter's minute), however long the copying takes on a loaded machine.
        for k in keys_of(who, tpl[who]):
            if con.pttl(k) > 0:
                con.pexpire(k, LIVE_UNTIL_CALLED)
    for a in range(0, n, chunk):
        for who in who_list:
            if who in OWN_CALL:
                got = con.evalsha(own, 0, c.PREFIX[who], a, min(n, a + chunk) - 1, OWN_CALL[who])
                assert got == min(n, a + chunk) - a, (who, got)
                continue
            three = "1" if who in ("three", "redisson") else "0"
            got = con.evalsha(sha, 0, tpl[who], c.PREFIX[who], a, min(n, a + chunk) - 1, three)
            assert got == min(n, a + chunk) - a, (who, got)
    return time.perf_counter() - t


# ---------------------------------------------------------------- part 1: server CPU per call

def names_for(who, size, rng, calls, c):
    if size == 0:
        return [c.PREFIX[who] + "hot"] * calls
    return [c.PREFIX[who] + str(rng.randrange(size)) for _ in range(calls)]


def cpu_phase(con, c, who, size, seed, calls=CALLS):
    rng = random.Random(seed)
    names = names_for(who, size, rng, calls, c)
    check = c.check(who)
    t = now_ms(con)
    cmds = [c.command(who, n, t + i // 100) for i, n in enumerate(names)]
    grants = [0]

    def count(r):
        grants[0] += check(r)
    con.execute_command("CONFIG", "RESETSTAT")
    before = main_thread_cpu(con)
    pipe(con, cmds, count)
    spent = main_thread_cpu(con) - before
    st = con.info("commandstats")[f"cmdstat_{c.STAT[who]}"]
    assert st["calls"] == calls and st.get("failed_calls", 0) == 0, (who, st)
    return st["usec"] / calls, spent * 1e6 / calls, grants[0] / calls


def main_thread_cpu(con):
    """The server main thread's CPU seconds (getrusage(RUSAGE_THREAD)): unlike commandstats'
    usec, which is wall time inside the command, it leaves out the time the thread was
    preempted, which on a loaded machine is most of the difference between runs."""
    cpu = con.info("cpu")
    return cpu["used_cpu_user_main_thread"] + cpu["used_cpu_sys_main_thread"]


def alive(con, c, size, sample=2000):
    """The share of a random sample of each contender's keys that exists now."""
    rng = random.Random(size)
    idx = [rng.randrange(size) for _ in range(sample)]
    out = {}
    for who in c.CPU:
        p = con.pipeline(transaction=False)
        for i in idx:
            p.exists(c.PREFIX[who] + str(i))
        out[who] = sum(p.execute()) / sample
    return out


def cpu(con, c, out):
    rows = {}
    for size in [0] + SIZES:
        label = "hot key" if size == 0 else f"{size:,} keys at random".replace(",", " ")
        con.execute_command("FLUSHALL", "SYNC")
        c.load(con)
        who_list = c.CPU if size else c.CPU + c.HOT_ONLY
        if size:
            took = create_limiters(con, c, [w for w in c.CPU if w != "gcra"], size)
            print(f"  {label}: created {size} limiters per contender in {took:.0f} s", flush=True)
        else:
            make_hot(con, c)
            for who in who_list:
                cpu_phase(con, c, who, 0, 0, 300)
        settle(con)
        alive_before = alive(con, c, size) if size else None
        began = time.perf_counter()
        per = {who: [] for who in who_list}
        main = {who: [] for who in who_list}
        grants = {who: [] for who in who_list}
        for r in range(ROUNDS):
            order = who_list[r % len(who_list):] + who_list[:r % len(who_list)]
            for who in order:
                us, m, g = cpu_phase(con, c, who, size, 1000 * r + 1)
                per[who].append(us)
                main[who].append(m)
                grants[who].append(g)
        ratio = lambda series, who: statistics.median(
            a / b for a, b in zip(series["onekey"], series[who]))
        # The middle half of the rounds' main-thread ratios: how far one round's reading moves
        # (a round is a fraction of a second of server CPU, on a shared machine).
        spread = lambda who: quartiles([a / b for a, b in zip(main["onekey"], main[who])])
        rows[label] = {who: {"usec_per_call": statistics.median(per[who]), "rounds": per[who],
                             "main_thread_us_per_call": statistics.median(main[who]),
                             "main_rounds": main[who],
                             "onekey_over_it": ratio(per, who),
                             "onekey_over_it_main": ratio(main, who),
                             "onekey_over_it_main_quartiles": spread(who),
                             "granted": statistics.mean(grants[who])} for who in who_list}
        rows[label]["_rounds_s"] = time.perf_counter() - began
        print_cpu_table(label, rows[label], c, who_list, f"{ROUNDS} rounds of {CALLS} calls, "
                        f"{rows[label]['_rounds_s']:.0f} s", flush=True)
        if size:
            after = alive(con, c, size)
            rows[label]["_alive"] = {"before": alive_before, "after": after}
            print("keys of a random sample that exist, before the rounds -> after (the rest "
                  "expired: a call on one creates it): " + "; ".join(
                      f"{w} {alive_before[w]:.0%} -> {after[w]:.0%}" for w in c.CPU), flush=True)
    out["cpu"] = rows


def quartiles(values):
    """The first and third quartiles of `values` (both the value itself when there is one)."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (0.0, 0.0)
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def make_hot(con, c):
    """The hot keys' limiters that no contender's own call makes: Redisson's, as its
    trySetRate would; the ONEKEY limiter `made` calls without RATE. Then each contender's first
    calls warm its key into its steady state (100 grants a minute, then refusals)."""
    con.execute_command("RATELIMIT.SETRATE", "rs:hot", RATE, INTERVAL)
    con.execute_command("RATELIMIT.SETRATE", c.PREFIX["made"] + "hot", RATE, INTERVAL,
                        "ONEKEY", "KEEPALIVE", KEEPALIVE)


def print_cpu_table(label, row, c, who_list, note, flush=True):
    print(f"\nServer CPU per call, {label} ({note}): in the command (INFO commandstats usec, wall "
          f"time) and the server's main thread (INFO cpu, whole server, preemption left out); "
          f"medians of the rounds and of each round's onekey/contender ratio:")
    print("| contender | in command us | main thread us | onekey / it (in command) "
          "| onekey / it (main thread) | its middle half of rounds | granted |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for who in who_list:
        r = row[who]
        q1, q3 = r["onekey_over_it_main_quartiles"]
        print(f"| {c.LABEL[who]} | {r['usec_per_call']:.2f} | {r['main_thread_us_per_call']:.2f} "
              f"| {r['onekey_over_it']:.2f} | {r['onekey_over_it_main']:.2f} | {q1:.2f} to {q3:.2f} "
              f"| {r['granted']:.0%} |")
    for key, what in (("onekey_over_it", "in command"), ("onekey_over_it_main", "main thread")):
        f, rs, g = row["fixed"][key], row["redisson"][key], row["gcra"][key]
        print(f"targets ({what}): onekey <= fixed window: {f:.2f}x {'held' if f <= 1 else 'MISSED'}; "
              f"redisson >= 3x onekey: {1 / rs:.2f}x {'held' if rs <= 1 / 3 else 'MISSED'}; "
              f"onekey <= 1.3x gcra: {g:.2f}x {'held' if g <= 1.3 else 'MISSED'}", flush=flush)
    if "made" in row:
        for key, what in (("rounds", "in command"), ("main_rounds", "main thread")):
            made = [a / b for a, b in zip(row["made"][key], row["gcra"][key])]
            q1, q3 = quartiles(made)
            print(f"ALLOW key on a ONEKEY limiter made by SETRATE / GCRA ({what}): "
                  f"{statistics.median(made):.2f}x ({q1:.2f} to {q3:.2f})", flush=flush)


# ---------------------------------------------------------------- part 2: instructions (callgrind)

def instructions(server, module, out):
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("\ninstructions: skipped (no valgrind)")
        return None
    d0 = f"/tmp/onekey-bench/cg-{os.getpid()}"
    shutil.rmtree(d0, ignore_errors=True); os.makedirs(d0)
    wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               "--toggle-collect=RedisModuleCommandDispatcher",
               "--toggle-collect=ValkeyModuleCommandDispatcher",
               "--toggle-collect=evalShaCommand",
               f"--callgrind-out-file={d0}/callgrind.out"] + (["--cache-sim=yes", "--LL=" + os.environ.get("CG_LL", "33554432,16,64")] if CG_CACHE else [])
    proc, con, _ = start(server, module, wrapper, tag="cg")
    pid = str(proc.pid)
    ctl = lambda *a: subprocess.run(["callgrind_control", *a, pid], check=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows, dumps, cycles, misses = {}, {}, {}, {}
    try:
        c = Contenders(con)
        for size in [0] + SIZES_CG:
            label = "hot key" if size == 0 else f"{size:,} keys at random".replace(",", " ")
            who_list = [w for w in c.CG if w not in c.HOT_ONLY]
            if not size:
                who_list += [w for w in c.HOT_ONLY if not CG_WHO or w in CG_WHO]
            con.execute_command("FLUSHALL", "SYNC")
            c.load(con)
            if size:
                took = create_limiters(con, c, [w for w in who_list if w != "gcra"], size)
                print(f"\n  (callgrind) {label}: created in {took:.0f} s", flush=True)
            else:
                make_hot(con, c)
                for who in who_list:
                    cpu_phase(con, c, who, 0, 0, 300)
            settle(con)
            rows[label] = {}
            for who in who_list:
                rng = random.Random(77)
                names = names_for(who, size, rng, CG_CALLS, c)
                t = now_ms(con)
                cmds = [c.command(who, n, t + i // 100) for i, n in enumerate(names)]
                check = c.check(who)
                pipe(con, cmds[:200], check)  # warm
                ctl("-i", "on")
                con.ping()
                before = set(glob.glob(f"{d0}/callgrind.out*"))
                ctl("-z")
                pipe(con, cmds, check)
                ctl("-d")
                ctl("-i", "off")
                new = [f for f in glob.glob(f"{d0}/callgrind.out*") if f not in before]
                events, total = [], None
                for f in new:
                    for line in open(f):
                        if line.startswith("events:"):
                            events = line.split()[1:]
                        if line.startswith("totals:") or line.startswith("summary:"):
                            total = dict(zip(events, map(int, line.split()[1:])))
                rows[label][who] = total["Ir"] / CG_CALLS
                if CG_CACHE:
                    l1 = sum(total.get(e, 0) for e in ("I1mr", "D1mr", "D1mw"))
                    ll = sum(total.get(e, 0) for e in ("ILmr", "DLmr", "DLmw"))
                    cycles.setdefault(label, {})[who] = (total["Ir"] + 10 * l1 + 100 * ll) / CG_CALLS
                    misses.setdefault(label, {})[who] = (l1 / CG_CALLS, ll / CG_CALLS)
                dumps[(label, who)] = new[-1]
            print_cg_table(label, rows[label], c, who_list)
            if CG_CACHE:
                print_cache_table(label, rows[label], cycles[label], misses[label], c, who_list)
    finally:
        proc.terminate(); proc.wait()
    out["instructions"] = rows
    if CG_CACHE:
        out["estimated_cycles"] = cycles
    return dumps


def print_cache_table(label, ins, cycles, misses, c, who_list):
    print(f"\nEstimated cycles per call inside the command (callgrind's cache simulation), {label}:")
    print("| contender | instructions | L1 misses | last-level misses | estimated cycles | onekey / it |")
    print("|---|---:|---:|---:|---:|---:|")
    for who in who_list:
        l1, ll = misses[who]
        print(f"| {c.LABEL[who]} | {ins[who]:.0f} | {l1:.1f} | {ll:.1f} | {cycles[who]:.0f} "
              f"| {cycles.get('onekey', 0) / cycles[who]:.2f} |")


def print_cg_table(label, row, c, who_list):
    ok = row["onekey"]
    print(f"\nInstructions per call inside the command (callgrind, {CG_CALLS} calls), {label}:")
    print("| contender | instructions | onekey / it |")
    print("|---|---:|---:|")
    for who in who_list:
        print(f"| {c.LABEL[who]} | {row[who]:.0f} | {ok / row[who]:.2f} |")
    if not all(w in row for w in ("fixed", "redisson", "gcra", "try")):
        return
    f, rs, g = row["fixed"], row["redisson"], row["gcra"]
    print(f"targets: onekey <= fixed window: {ok / f:.2f}x {'held' if ok <= f else 'MISSED'}; "
          f"redisson / onekey >= 3: {rs / ok:.2f}x {'held' if rs >= 3 * ok else 'MISSED'}; "
          f"onekey <= 1.3x gcra: {ok / g:.2f}x {'held' if ok <= 1.3 * g else 'MISSED'}; "
          f"TRYACQUIRE ONEKEY (a one-value reply) / GCRA: {row['try'] / g:.2f}x", flush=True)
    if "made" in row:
        print(f"ALLOW key on a ONEKEY limiter made by SETRATE / GCRA: {row['made'] / g:.2f}x",
              flush=True)


# ---------------------------------------------------------------- part 3: memory

def keys_of(who, name):
    if who in ("three", "redisson"):
        return [name, f"{{{name}}}:value", f"{{{name}}}:permits"]
    return [name]


def memory_case(con, c, who, entries, keys):
    con.execute_command("FLUSHALL", "SYNC")
    c.load(con)
    settle(con)
    T0 = now_ms(con) + AHEAD
    con.execute_command("RATELIMIT.DEBUG", "SETCLOCK", T0)
    base = con.info("memory")["used_memory"]
    step = INTERVAL // entries
    grants = 0
    for e in range(entries):
        now = T0 + e * step
        if e:
            con.execute_command("RATELIMIT.DEBUG", "ADVANCE", step)
        grants += con.evalsha(c.mem_sha[who], 0, "m:", 0, keys - 1, now)
    assert grants == entries * keys, (who, entries, grants)
    settle(con)
    used = con.info("memory")["used_memory"] - base
    one = sum(con.memory_usage(k, samples=0) or 0 for k in keys_of(who, "m:0"))
    assert con.exists(*keys_of(who, "m:0")) == len(keys_of(who, "m:0")), who
    strlen = con.strlen("m:0") if who == "onekey" else None
    return one, used / keys, strlen


def memory(con, c, out):
    c.mem_sha = {who: con.script_load(c.populate_script(who)) for who in c.ORDER}
    rows = {}
    for entries in (1, 10, 50, 100):
        rows[entries] = {}
        for who in c.ORDER:
            one, per, strlen = memory_case(con, c, who, entries, MEM_KEYS)
            rows[entries][who] = {"memory_usage": one, "used_memory_per_key": per,
                                  "strlen": strlen}
    out["memory"] = {str(k): v for k, v in rows.items()}
    r50 = rows[50]
    print(f"\nMemory per limiter, 100 a minute with 50 grants spread over its window "
          f"(MEMORY USAGE ... SAMPLES 0 of its keys; used_memory grown per limiter over "
          f"{MEM_KEYS} limiters):")
    print("| limiter | MEMORY USAGE B | x GCRA | used_memory B/limiter | x GCRA |")
    print("|---|---:|---:|---:|---:|")
    g = r50["gcra"]
    for who in ("onekey", "gcra", "three"):
        m = r50[who]
        print(f"| {c.LABEL[who]} | {m['memory_usage']} | {m['memory_usage'] / g['memory_usage']:.2f} "
              f"| {m['used_memory_per_key']:.0f} | {m['used_memory_per_key'] / g['used_memory_per_key']:.2f} |")
    ok = r50["onekey"]
    print(f"ONEKEY string: {ok['strlen']} bytes. target: within 2x of GCRA: MEMORY USAGE "
          f"{ok['memory_usage'] / g['memory_usage']:.2f}x, used_memory "
          f"{ok['used_memory_per_key'] / g['used_memory_per_key']:.2f}x "
          f"{'held' if max(ok['memory_usage'] / g['memory_usage'], ok['used_memory_per_key'] / g['used_memory_per_key']) <= 2 else 'MISSED'}")
    print("\nBytes per limiter of 100 a minute by entries in its window: MEMORY USAGE "
          f"(used_memory grown per limiter over {MEM_KEYS}):")
    print("| limiter | 1 entry | 10 entries | 50 entries | 100 entries |")
    print("|---|---:|---:|---:|---:|")
    for who in c.ORDER:
        cells = [f"{rows[e][who]['memory_usage']} ({rows[e][who]['used_memory_per_key']:.0f})"
                 for e in (1, 10, 50, 100)]
        print(f"| {c.LABEL[who]} | " + " | ".join(cells) + " |")

    # Bounded by interval / precision whatever the rate: a grant every 100 ms for two windows.
    bound = {}
    print("\nONEKEY's size whatever the rate: a grant of rate/600 permits every 100 ms for two "
          "windows of 60 s (1 200 grants; default precision 1 s = 60 buckets, and PRECISION 100 "
          "= 600 buckets); the three-key form beside it:")
    print("| limiter | rate/min | precision ms | grants | permits in window | STRLEN B | MEMORY USAGE B |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for who, rate, precision in (("onekey", 100, None), ("onekey", 10000, None),
                                 ("onekey", 1000000, None), ("onekey", 1000000, 100),
                                 ("three", 1000000, None)):
        permits = max(1, rate // 600)
        con.execute_command("FLUSHALL", "SYNC")
        con.execute_command("RATELIMIT.DEBUG", "SETCLOCK", now_ms(con) + AHEAD)
        opts = (["ONEKEY"] if who == "onekey" else []) + (["PRECISION", precision] if precision else [])
        calls = 2 * INTERVAL // 100
        p = con.pipeline(transaction=False)
        for i in range(calls):
            p.execute_command("RATELIMIT.ALLOW", "b", permits, "RATE", rate, INTERVAL, *opts,
                              "KEEPALIVE", KEEPALIVE)
            p.execute_command("RATELIMIT.DEBUG", "ADVANCE", 100)
        replies = p.execute()
        granted = sum(1 for r in replies[0::2] if r[1] == 1)
        inwin = rate - con.execute_command("RATELIMIT.AVAILABLE", "b")
        mu = sum(con.memory_usage(k, samples=0) or 0 for k in keys_of(who, "b"))
        sl = con.strlen("b") if who == "onekey" else "-"
        bound[f"{who} {rate} {precision or 'default'}"] = {"strlen": sl, "memory_usage": mu,
                                                           "granted": granted}
        print(f"| {c.LABEL[who]} | {rate} | {precision or (INTERVAL // 60 if who == 'onekey' else 1)} "
              f"| {granted} | {inwin} | {sl} | {mu} |")
    out["memory_bound"] = bound


# ---------------------------------------------------------------- part 4: where the time goes

def annotate(dump, top=12):
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", dump], capture_output=True,
                         text=True).stdout
    lines = [l for l in out.splitlines() if re.match(r"^\s*[\d,]+ \(", l)]
    print(f"\nWhere ONEKEY's instructions go, at random (callgrind_annotate, own instructions "
          f"per function, {CG_CALLS} calls; {dump}):")
    for l in lines[:top]:
        print("  " + l.strip()[:160])
    inc = subprocess.run(["callgrind_annotate", "--inclusive=yes", dump], capture_output=True,
                         text=True).stdout
    rows = [l for l in inc.splitlines() if re.match(r"^\s*[\d,]+ \(", l)
            and ("ratelimit::" in l or ":RM_" in l or ":VM_" in l)]
    print("Inclusive (the module's functions and the module API calls it makes, per call's share):")
    for l in rows[:top + 10]:
        print("  " + re.sub(r" \[/[^]]*\]$", "", l.strip())[:160])


def perf_profile(con, proc, c, size):
    if shutil.which("perf") is None:
        print("\nperf: skipped (not installed)")
        return
    data = f"/tmp/onekey-bench/perf-{os.getpid()}.data"
    rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-g", "-p", str(proc.pid),
                            "-o", data], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1)
    if rec.poll() is not None:
        print(f"\nperf: cannot record the server here: {rec.stderr.read().decode().strip()[:200]}")
        return
    for r in range(6):
        cpu_phase(con, c, "onekey", size, 5000 + r, 20000)
    rec.send_signal(2); rec.wait()
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio",
                          "--sort", "symbol", "-g", "none", "--percent-limit", "1"],
                         capture_output=True, text=True).stdout
    print(f"\nperf record of the server during 120 000 ONEKEY calls on {size} keys at random "
          "(self time by function, whole server):")
    n = 0
    for l in rep.splitlines():
        if re.match(r"^\s+[\d.]+%", l):
            print("  " + l.strip()[:160]); n += 1
            if n >= 15:
                break


# ---------------------------------------------------------------- main

def main():
    server, module = sys.argv[1], sys.argv[2]
    out = {"server": server, "module": module, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "calls": CALLS, "rounds": ROUNDS, "load": os.getloadavg()}
    began = time.perf_counter()
    proc, con, _ = start(server, module, tag="main")
    try:
        c = Contenders(con)
        print(f"onekey bench on {con.info('server')['redis_version']}, {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.1f}; scripts: {c.fixed_from}, {c.redisson_from}, "
              f"{c.limits_from}", flush=True)
        if "cpu" in PARTS:
            t = time.perf_counter()
            cpu(con, c, out)
            print(f"(cpu part: {time.perf_counter() - t:.0f} s)", flush=True)
        if "profile" in PARTS and SIZES:
            con.execute_command("FLUSHALL", "SYNC")
            c.load(con)
            create_limiters(con, c, ["onekey"], SIZES[0])
            settle(con)
            perf_profile(con, proc, c, SIZES[0])
        if "memory" in PARTS:
            t = time.perf_counter()
            memory(con, c, out)
            print(f"(memory part: {time.perf_counter() - t:.0f} s)", flush=True)
    finally:
        proc.terminate(); proc.wait()
    if "instructions" in PARTS:
        t = time.perf_counter()
        dumps = instructions(server, module, out)
        print(f"(instructions part: {time.perf_counter() - t:.0f} s)", flush=True)
        if dumps and "profile" in PARTS and SIZES_CG:
            label = f"{SIZES_CG[0]:,} keys at random".replace(",", " ")
            annotate(dumps[(label, "onekey")])
    out["seconds"] = time.perf_counter() - began
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "onekey.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
    print(f"\nonekey bench: {out['seconds']:.0f} s; load average now {os.getloadavg()[0]:.1f} "
          f"(a shared machine: CPU per call moves by about 10% from run to run; the callgrind "
          f"counts by about 1%). Results in bench/results/onekey.json", flush=True)


if __name__ == "__main__":
    main()
