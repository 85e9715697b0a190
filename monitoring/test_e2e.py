#!/usr/bin/env python3
"""The dashboard's queries proven end to end: redis-server with the module, the real redis_exporter
running monitoring/ratelimit.lua in front of it, and a real Prometheus scraping the exporter with
monitoring/prometheus.yml's relabeling, all on free loopback ports. The test drives grants,
refusals and an error into two groups, then runs every query of grafana-dashboard.json through
Prometheus' HTTP API and checks its series and values.

Usage: test_e2e.py REDIS_SERVER MODULE_SO   (make test-monitoring). Python 3 standard library only.

Rates are checked exactly: every series has its first sample in the exporter's first scrape
(before the traffic), and the queries run at the time of a scrape after the traffic with the rate
window ($__rate_interval) set to span exactly from that first scrape, so rate() extrapolates
nothing and is the increase divided by the window (a range includes both its ends in Prometheus
2, Debian's 2.42; Prometheus 3 leaves out the start). Waits poll until what they wait for is seen,
up to a generous cap; nothing here asserts how long anything takes.
"""
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER = "prometheus-redis-exporter"
PROMETHEUS = "prometheus"
WAIT_CAP_S = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A minimal RESP2 client: enough to send commands and read integer, bulk and error replies."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._read()

    def _read(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def close(self):
        self.sock.close()


class RedisError(str):
    pass


def wait_until(what, fetch, expected=None):
    """Polls fetch() until it returns expected (or, with no expected, anything but None), up to
    WAIT_CAP_S; returns what it fetched."""
    deadline = time.monotonic() + WAIT_CAP_S
    last = None
    while time.monotonic() < deadline:
        try:
            last = fetch()
            if (last is not None) if expected is None else (last == expected):
                return last
        except OSError as e:  # not listening yet
            last = e
        time.sleep(0.25)
    raise AssertionError(f"gave up waiting for {what}: expected {expected!r}, last seen {last!r}")


def prom_api(port, expr, at=None):
    params = {"query": expr}
    if at is not None:
        params["time"] = f"{at:.3f}"
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise AssertionError(f"query {expr!r} failed: {body}")
    return body["data"]["result"]


def prom_query(port, expr, at=None):
    """An instant query's series as {labels without __name__, instance, job: value}."""
    return {
        json.dumps({k: v for k, v in s["metric"].items() if k not in ("__name__", "instance", "job")}, sort_keys=True): float(s["value"][1])
        for s in prom_api(port, expr, at)
    }


def scrape_times(port, expr):
    """The timestamps (seconds, to the ms) of every sample of every series of expr, per series."""
    return [[float(t) for t, _ in s["values"]] for s in prom_api(port, f"{expr}[1h]")]


def labels(**kv):
    return json.dumps(kv, sort_keys=True)


def dashboard_queries(window):
    """(panel title, refId) -> expr, for every target of every panel, rows included."""
    with open(os.path.join(HERE, "grafana-dashboard.json")) as f:
        dash = json.load(f)
    queries = {}

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                queries[(p["title"], t["refId"])] = t["expr"].replace("$__rate_interval", window)

    walk(dash["panels"])
    return queries


# The traffic (the module's clock frozen: nothing refills). Phase one runs before the exporter
# starts, so every series, the groups' too, has its first sample in the same scrape, taken before
# phase two: rate() over a window from that scrape sees phase two's increase, and only that.
#   api:user  limit 10: api:user:0 one grant (phase one); api:user:1 ten grants, the last two
#             leaving at most a tenth (near limit), then 5 refusals.
#   login     limit 2: login:bob one grant (phase one); login:alice two grants (the second near
#             limit) and 8 refusals; login:carol limit 1: one grant (near) and 3 refusals.
#   ünï       limit 1: ünï:1 one grant (phase one), one refusal: the script writes its bytes
#             other than printable ASCII %XX (group `%C3%BCn%C3%AF`); no grant in phase two, so
#             the shares leave it out.
#   one error: TRYACQUIRE of a limiter never set.
UNI = "%C3%BCn%C3%AF"
PHASE2 = {"api:user": dict(grants=10, refusals=5, near=2), "login": dict(grants=3, refusals=11, near=2),
          UNI: dict(grants=0, refusals=1, near=0)}
PHASE1_GRANTS = 3
# Phase two's increase of the server-wide counters (INFO ratelimit_stats).
ALL_GRANTS, ALL_REFUSALS, ALL_ERRORS = 13, 17, 1
TOP = {"login:alice": 8, "api:user:1": 5, "login:carol": 3, UNI + ":1": 1}


def drive_phase1(r):
    limits = (("api:user:0", 10), ("api:user:1", 10), ("login:bob", 2), ("login:alice", 2), ("login:carol", 1),
              ("ünï:1", 1))
    for name, limit in limits:
        assert r.call("RATELIMIT.SETRATE", name, limit, 600000) == 1
    assert r.call("RATELIMIT.TRYACQUIRE", "api:user:0") is None
    assert r.call("RATELIMIT.TRYACQUIRE", "login:bob") is None
    assert r.call("RATELIMIT.TRYACQUIRE", "ünï:1") is None


def drive_phase2(r):
    def take(name, grants, refusals):
        for _ in range(grants):
            assert r.call("RATELIMIT.TRYACQUIRE", name) is None, name
        for _ in range(refusals):
            assert isinstance(r.call("RATELIMIT.TRYACQUIRE", name), int), name

    take("api:user:1", 10, 5)
    take("login:alice", 2, 8)
    take("login:carol", 1, 3)
    take("ünï:1", 0, 1)
    assert isinstance(r.call("RATELIMIT.TRYACQUIRE", "never:set"), RedisError)


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def check(prom, first, last):
    """Every dashboard query, run at the scrape `last` with a rate window from the scrape `first`,
    against what the traffic must show; a query without an expectation here fails the test (a
    panel added to the dashboard must be proven too)."""
    window_ms = round((last - first) * 1000)
    seconds = window_ms / 1000
    queries = dashboard_queries(f"{window_ms}ms")
    results = {key: prom_query(prom, expr, at=last) for key, expr in queries.items()}
    checked = set()

    def got(title, ref="A"):
        checked.add((title, ref))
        return results[(title, ref)]

    r = got("Refusals per rule")
    assert set(r) == {labels(group=g) for g in PHASE2} | {labels(group="_overflow")}, r
    assert r[labels(group="_overflow")] == 0, r
    for g, c in PHASE2.items():
        assert close(r[labels(group=g)], c["refusals"] / seconds), (g, r, seconds)

    r = got("Share of calls refused, per rule")
    assert set(r) == {labels(group=g) for g in PHASE2}, r
    for g, c in PHASE2.items():
        assert close(r[labels(group=g)], c["refusals"] / (c["refusals"] + c["grants"])), (g, r)

    r = got("Near-limit share of grants, per rule")
    granted = {g: c for g, c in PHASE2.items() if c["grants"]}
    assert set(r) == {labels(group=g) for g in granted} and UNI not in granted, r
    for g, c in granted.items():
        assert close(r[labels(group=g)], c["near"] / c["grants"]), (g, r)

    title = "Grants and refusals, all limiters"
    grants, refusals = got(title, "A"), got(title, "B")
    timeouts, errors = got(title, "C"), got(title, "D")
    for series in (grants, refusals, timeouts, errors):
        assert set(series) == {labels()}, series
    assert close(grants[labels()], ALL_GRANTS / seconds), (grants, seconds)
    assert close(refusals[labels()], ALL_REFUSALS / seconds), (refusals, seconds)
    assert close(errors[labels()], ALL_ERRORS / seconds), (errors, seconds)
    assert timeouts[labels()] == 0, timeouts

    r = got("Most-refused limiters (last 1 to 2 minutes)")
    assert r == {labels(limiter=n): float(c) for n, c in TOP.items()}, r

    r = got("Groups counted under _overflow")
    assert r == {labels(): 0.0}, r

    missing = set(queries) - checked
    assert not missing, f"dashboard queries without an expectation: {sorted(missing)}"
    return len(checked)


def scrape_config(exporter_port, rules_path):
    with open(os.path.join(HERE, "prometheus.yml")) as f:
        text = f.read()
    for old, new in (("localhost:9121", f"127.0.0.1:{exporter_port}"), ("scrape_interval: 15s", "scrape_interval: 1s"),
                     ("- alerts.yml", f"- {rules_path}")):
        assert old in text, f"monitoring/prometheus.yml no longer has {old!r}"
        text = text.replace(old, new)
    return text


def main(redis_server, module):
    tmp = tempfile.mkdtemp(prefix="ratelimit-monitoring-")
    procs = []

    def start(args, name):
        log = open(os.path.join(tmp, name + ".log"), "w")
        procs.append((name, subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)))

    try:
        redis_port, exporter_port, prom_port = free_port(), free_port(), free_port()
        start([redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--loadmodule", module, "debug-commands", "yes"], "redis")
        r = wait_until("redis-server", lambda: Redis(redis_port))
        wait_until("redis PONG", lambda: r.call("PING"), "PONG")
        assert r.call("RATELIMIT.DEBUG", "SETCLOCK", 1767225600000) == "OK"
        drive_phase1(r)

        start([EXPORTER, "-redis.addr", f"redis://127.0.0.1:{redis_port}", "-web.listen-address",
               f"127.0.0.1:{exporter_port}", "-script", os.path.join(HERE, "ratelimit.lua")], "exporter")
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write(scrape_config(exporter_port, os.path.join(HERE, "alerts.yml")))
        start([PROMETHEUS, "--config.file", config, "--storage.tsdb.path", os.path.join(tmp, "data"),
               "--web.listen-address", f"127.0.0.1:{prom_port}"], "prometheus")

        def value(expr):
            return prom_query(prom_port, expr)

        wait_until("the first scrape", lambda: value("ratelimit_group_grants_total"), {
            labels(group="api:user"): 1.0, labels(group="login"): 1.0, labels(group=UNI): 1.0,
            labels(group="_overflow"): 0.0})
        drive_phase2(r)
        totals = "label_replace(ratelimit_acquired_total, 'counter', 'acquired', '', '')" \
            " or label_replace(ratelimit_refused_total, 'counter', 'refused', '', '')" \
            " or label_replace(ratelimit_errors_total, 'counter', 'errors', '', '')"
        wait_until("the traffic scraped", lambda: value(totals), {
            labels(counter="acquired"): float(PHASE1_GRANTS + ALL_GRANTS), labels(counter="refused"): float(ALL_REFUSALS),
            labels(counter="errors"): float(ALL_ERRORS)})
        # The rules load in the real Prometheus too, and none fires on this traffic yet (for: 5m).
        rules = json.load(urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/rules", timeout=30))
        names = {rule["name"] for grp in rules["data"]["groups"] for rule in grp["rules"]}
        assert names == {"RateLimitGroupRefusingMost", "RateLimitGroupsOverflowing"}, names

        # Every series' first sample is the exporter's first scrape, taken before phase two.
        firsts = {times[0] for m in ("ratelimit_acquired_total", "ratelimit_group_grants_total",
                                     "ratelimit_group_refusals_total", "ratelimit_group_near_limit_total")
                  for times in scrape_times(prom_port, m)}
        assert len(firsts) == 1, f"the series did not start in one scrape: {sorted(firsts)}"
        last = max(scrape_times(prom_port, "ratelimit_refused_total")[0])
        n = check(prom_port, firsts.pop(), last)
        r.close()
        print(f"monitoring end-to-end: {n} dashboard queries proven through redis_exporter and Prometheus")
    except BaseException:
        for name, _ in procs:
            path = os.path.join(tmp, name + ".log")
            with open(path) as f:
                tail = f.read()[-3000:]
            print(f"--- {name} log (tail) ---\n{tail}", file=sys.stderr)
        raise
    finally:
        for _, p in reversed(procs):
            p.terminate()
        for _, p in reversed(procs):
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
