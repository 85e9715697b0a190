"""Per-user rate limiting for any WSGI app with one RATELIMIT.ALLOW call per request.

    REDIS_URL=redis://127.0.0.1:6379 PORT=8080 python app.py
    curl -i -H 'X-User: alice' http://127.0.0.1:8080/

With REDIS_CLUSTER=host:port[,host:port...] it uses a Redis Cluster seeded with those nodes
instead. redis-py's RedisCluster routes the module's commands itself, from the key positions
COMMAND reports (COMMAND GETKEYS for RATELIMIT.ALLOWALL), so the calls are the same.

Requests are keyed by the X-User header (use your authenticated user id in a real app), or by
the remote address. Each user's limiter is created by its first request (RATE) and removed by
Redis once the user is idle for a whole interval (KEEPALIVE), so no setup call is needed.
"""

import math
import os
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIServer, make_server

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

LIMIT, INTERVAL_MS = 10, 60_000  # 10 requests a minute per user
DAY_MS = 86_400_000
# /search also has limits of its own per user, taken together with RATELIMIT.ALLOWALL.
SEARCH_LIMITS = [("minute", 3, 60_000), ("day", 100, DAY_MS)]
REPORTS_TIMEOUT_MS = 1_000  # /report waits at most this long for its turn


def seconds(ms):
    """Milliseconds as whole seconds, rounded up: a client that waits this long is never early."""
    return str(math.ceil(ms / 1000))


class RateLimit:
    """WSGI middleware: 429 with Retry-After once a user is over the limit, X-RateLimit-* always."""

    def __init__(self, app, client, limit=LIMIT, interval_ms=INTERVAL_MS):
        self.app, self.redis = app, client
        # KEEPALIVE = interval: an idle limiter expires only when all its permits have.
        self.rate = ["RATE", limit, interval_ms, "OVERALL", "KEEPALIVE", interval_ms]

    def __call__(self, environ, start_response):
        user = environ.get("HTTP_X_USER") or environ["REMOTE_ADDR"]
        try:
            reply = self.redis.execute_command("RATELIMIT.ALLOW", f"api:user:{user}", *self.rate)
        except redis.RedisError:
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"rate limiter unavailable\n"]
        # RESP3 (redis-py's default) replies a map: a dict. RESP2 would give name, value, ...
        r = reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2]))
        headers = [
            ("X-RateLimit-Limit", str(r[b"limit"])),
            ("X-RateLimit-Remaining", str(r[b"remaining"])),
            ("X-RateLimit-Reset", seconds(r[b"reset_after"])),
        ]
        if not r[b"allowed"]:
            headers += [("Retry-After", seconds(r[b"retry_after"])), ("Content-Type", "text/plain")]
            start_response("429 Too Many Requests", headers)
            return [b"too many requests\n"]

        def with_headers(status, app_headers, exc_info=None):
            return start_response(status, app_headers + headers, exc_info)

        return self.app(environ, with_headers)


def acquire(waiters, key, timeout_ms):
    """RATELIMIT.ACQUIRE: waits in Redis, first come first served, up to timeout_ms.

    Returns None once the permit is ours, else the wait hint in ms. `waiters` must be a client
    whose socket timeout is longer than timeout_ms and that never retries: redis-py's defaults
    (5 s timeout, 10 retries) would give up and resend the command, queueing a new waiter.
    """
    return waiters.execute_command(
        "RATELIMIT.ACQUIRE", key, "TIMEOUT", timeout_ms, "RATE", 1, 60_000, "KEEPALIVE", 60_000
    )


def allow_all(client, user):
    """RATELIMIT.ALLOWALL: a permit from each of the user's search limits, or from none of them.

    ALLOWALL takes no RATE: the limiters are made with SETRATE ... NX when it says they are
    missing. Their keys share a hash tag, hence a slot in a cluster. There, naming the node spares
    redis-py a COMMAND GETKEYS round trip per call (it routes every other command on its own).
    """
    keys = [f"{{search:{user}}}:{name}" for name, _, _ in SEARCH_LIMITS]
    route = {}
    if isinstance(client, RedisCluster):
        route["target_nodes"] = client.get_node_from_key(keys[0])
    try:
        return client.execute_command("RATELIMIT.ALLOWALL", len(keys), *keys, **route)
    except redis.ResponseError as e:
        if "not initialized" not in str(e):
            raise
    for key, (_, rate, interval) in zip(keys, SEARCH_LIMITS):
        client.execute_command("RATELIMIT.SETRATE", key, rate, interval, "KEEPALIVE", DAY_MS, "NX")
    return client.execute_command("RATELIMIT.ALLOWALL", len(keys), *keys, **route)


def make_app(client, waiters):
    def app(environ, start_response):
        user = environ.get("HTTP_X_USER") or environ["REMOTE_ADDR"]
        if environ["PATH_INFO"] == "/search":
            try:
                reply = allow_all(client, user)
            except redis.RedisError:
                start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
                return [b"rate limiter unavailable\n"]
            r = reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2]))
            if not r[b"allowed"]:
                headers = [("Retry-After", seconds(r[b"retry_after"])), ("Content-Type", "text/plain")]
                start_response("429 Too Many Requests", headers)
                return [b"search limit reached: " + r[b"limited_by"] + b"\n"]
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [f"results for {user}\n".encode()]
        if environ["PATH_INFO"] == "/report":
            # Expensive reports: one a minute across all users; wait briefly for a turn.
            wait = acquire(waiters, "reports", REPORTS_TIMEOUT_MS)
            if wait is not None:
                headers = [("Retry-After", seconds(wait)), ("Content-Type", "text/plain")]
                start_response("503 Service Unavailable", headers)
                return [b"reports are busy\n"]
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [f"report for {user}\n".encode()]
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [f"hello {user}\n".encode()]

    return app


def connect(**options):
    """A client of REDIS_CLUSTER's cluster if set, else of the server at REDIS_URL."""
    seeds = os.environ.get("REDIS_CLUSTER")
    if seeds:
        nodes = [ClusterNode(host, int(port)) for host, port in
                 (seed.rsplit(":", 1) for seed in seeds.split(","))]
        return RedisCluster(startup_nodes=nodes, **options)
    return redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"), **options)


class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


if __name__ == "__main__":
    client = connect()
    # A pool of its own: a blocked ACQUIRE holds its connection until it returns.
    waiters = connect(socket_timeout=REPORTS_TIMEOUT_MS / 1000 + 5, retry=Retry(NoBackoff(), 0))
    port = int(os.environ.get("PORT", "8080"))
    server = make_server("127.0.0.1", port, RateLimit(make_app(client, waiters), client), Server)
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    server.serve_forever()
