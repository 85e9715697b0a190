"""The moving window on the module's sliding log, shared by the sync and asyncio storages:
limiter names, the commands a hit and a read send, and their replies in RESP2 or RESP3."""

from __future__ import annotations

import time

#: A hit: one RATELIMIT.ALLOW that creates the limiter on first use (RATE) and lets Redis drop
#: it once idle for a whole window (KEEPALIVE = the window: by then nothing is left to remember).
ALLOW = "RATELIMIT.ALLOW"
#: A read of the window: one read-only call, atomic, that takes and writes nothing.
PEEK = "RATELIMIT.PEEK"
DELETE = "RATELIMIT.DELETE"

#: Marks the module's limiters among limits' own keys (which keep `<prefix>:<key>`): a limiter is a
#: hash where limits' moving window keeps a list, so sharing the name would answer WRONGTYPE to
#: whichever storage came second during a switch of `storage_uri`.
NAMESPACE = "ratelimit"


def limiter_name(prefix: str, key: str) -> str:
    """The limiter's name for limits' `key`: `<prefix>:ratelimit:<key>`, with `{`, `}` and `%`
    percent-encoded so the name never holds a hash tag. The module then names its state keys
    `{<name>}:value` and `{<name>}:permits`, in the name's slot in a Redis Cluster."""
    escaped = key.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return f"{prefix}:{NAMESPACE}:{escaped}"


def state_key_pattern(prefix: str) -> str:
    """A KEYS/SCAN pattern matching the state keys of every limiter under `prefix`."""
    return "{" + f"{prefix}:{NAMESPACE}:*"


def allow_args(name: str, limit: int, expiry: int, amount: int) -> tuple:
    interval_ms = int(expiry) * 1000
    return (ALLOW, name, amount, "RATE", limit, interval_ms, "KEEPALIVE", interval_ms)


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
    """limits' (window start, hits in the window) from PEEK's reply for 1 permit.

    The hits are the permits the limiter holds: `limit - available`, where the permits
    available are `remaining`, plus the one permit a granted peek counted as taken. The window
    started `expiry` seconds before its oldest hit frees, so it resets when that hit frees.
    """
    f = fields(reply)
    available = f["remaining"] + (1 if f["allowed"] else 0)
    count = max(0, f["limit"] - available)
    if f["oldest_after"] == 0:
        return now, count
    return now + f["oldest_after"] / 1000 - expiry, count


def now() -> float:
    return time.time()
