"""The moving window on the module's sliding log, shared by the sync and asyncio storages:
limiter names, the commands a hit and a read send, and their replies in RESP2 or RESP3."""

from __future__ import annotations

import time

#: A hit: one RATELIMIT.ALLOW that creates the limiter on first use (RATE) and lets Redis drop
#: it once idle for a whole window (KEEPALIVE = the window: by then nothing is left to remember).
ALLOW = "RATELIMIT.ALLOW"
#: A read of the window: one read-only call, atomic, that takes and writes nothing (PEEK for 0
#: permits: the limiter as it stands, asking for nothing).
PEEK = "RATELIMIT.PEEK"
DELETE = "RATELIMIT.DELETE"

#: Marks the module's limiters among limits' own keys (which keep `<prefix>:<key>`): a limiter is a
#: string of the module's where limits' moving window keeps a list and its fixed window a
#: counter, so sharing the name would answer WRONGTYPE to whichever storage came second during a
#: switch of `storage_uri`.
NAMESPACE = "ratelimit"

#: A limiter's form: its whole state in one string key (ONEKEY: no Redisson client shares limits'
#: limiters), logged to the millisecond (PRECISION 1), whatever the limit: limits' moving window
#: is exact, a hit leaves the window `expiry` seconds after it was taken, and limits' own tests
#: check it to the millisecond at a million hits per 2 s (test_moving_window_huge_cost fails on
#: buckets of a hundredth of the window). The price: a one-key log is rewritten whole by each
#: hit, so a hot key under a limit in the thousands holds an entry per millisecond with a hit
#: and costs several times limits' script per hit (docs/python.md, Cost).
#:
#: The module bounds a one-key log at MAX_ENTRIES entries (one per permit and one per bucket at
#: most): a limit above that over a window longer than MAX_ENTRIES ms gets buckets of
#: window/MAX_ENTRIES ms, its permits freed at most that late (15 ms for a minute), never early.
MAX_ENTRIES = 4096


def precision_ms(limit: int, interval_ms: int) -> int:
    """Exact (1 ms) wherever the module's bound allows it, else the finest bucket it accepts."""
    if min(limit, interval_ms) <= MAX_ENTRIES:
        return 1
    return -(-interval_ms // MAX_ENTRIES)


def limiter_name(prefix: str, key: str) -> str:
    """The limiter's name for limits' `key`: `<prefix>:ratelimit:<key>`, with `{`, `}` and `%`
    percent-encoded so the name never holds a hash tag: in a Redis Cluster each limiter's one
    key lands in the slot of its whole name, spread as limits' own keys are."""
    escaped = key.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return f"{prefix}:{NAMESPACE}:{escaped}"


def allow_args(name: str, limit: int, expiry: int, amount: int) -> tuple:
    """A hit: created on first use as a limiter in one key, exact where the module's bound allows
    (precision_ms), dropped once idle for a whole window."""
    interval_ms = int(expiry) * 1000
    precision = precision_ms(int(limit), interval_ms)
    return (
        ALLOW, name, amount, "RATE", limit, interval_ms, "ONEKEY", "PRECISION", precision,
        "KEEPALIVE", interval_ms,
    )


def peek_args(name: str) -> tuple:
    return (PEEK, name, 0)


def fields(reply) -> dict[str, int]:
    """ALLOW's or PEEK's reply as {field: integer}: a map in RESP3 (redis-py 8's default), a flat
    list of name, value pairs in RESP2; names are bytes unless responses are decoded."""
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])
    return {
        (name.decode() if isinstance(name, bytes) else name): int(value) for name, value in pairs
    }


def is_not_initialized(error: Exception) -> bool:
    """Whether PEEK failed because the limiter doesn't exist: no hit was ever logged (or the
    limiter expired with its keep-alive), so the window is empty."""
    return "RateLimiter is not initialized" in str(error)


def moving_window(reply, expiry: int, now: float) -> tuple[float, int]:
    """limits' (window start, hits in the window) from PEEK's reply for 0 permits.

    The hits are the permits the limiter holds: `limit - remaining`, `remaining` being the
    permits available now. The window started `expiry` seconds before its oldest hit frees, so
    it resets when that hit frees.
    """
    f = fields(reply)
    count = max(0, f["limit"] - f["remaining"])
    if f["oldest_after"] == 0:
        return now, count
    return now + f["oldest_after"] / 1000 - expiry, count


def now() -> float:
    return time.time()
