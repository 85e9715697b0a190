"""The storages on the module, sync and asyncio, RESP2 and RESP3, one server and a cluster:
exact windows on the module's frozen clock, one command per hit and per read, the keys they
make, clear and reset, and limits' own strategies on the same connection."""

from __future__ import annotations

import inspect

import pytest
import redis
from conftest import advance
from limits import RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio import strategies as aio_strategies
from limits.storage import RedisStorage, storage_from_string
from limits import strategies

import ratelimit_limits
from ratelimit_limits import _window

NOW = 1_800_000_000.0  # the application's clock, frozen (limits' times are epoch seconds)


async def wait(value):
    return await value if inspect.isawaitable(value) else value


@pytest.fixture(params=["sync", "async"])
def flavour(request):
    return request.param


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def protocol(request):
    return request.param


@pytest.fixture(params=["server", "cluster"])
def topology(request, flavour, protocol):
    """(storage URI, storage options, the nodes' clients, strategies module)."""
    prefix = "async+" if flavour == "async" else ""
    if request.param == "server":
        server = request.getfixturevalue("redis_server")
        uri, nodes = f"{prefix}ratelimit://127.0.0.1:{server.port}", [server.client()]
    else:
        cluster = request.getfixturevalue("redis_cluster")
        uri, nodes = f"{prefix}ratelimit+cluster://{cluster.seeds}", cluster.clients()
    return uri, {"protocol": protocol}, nodes, aio_strategies if prefix else strategies


@pytest.fixture(autouse=True)
def frozen_app_clock(monkeypatch):
    monkeypatch.setattr(_window, "now", lambda: NOW)


def calls(nodes, command):
    """How many times the nodes ran `command` (INFO commandstats, summed)."""
    total = 0
    for node in nodes:
        stats = node.info("commandstats")
        total += stats.get(f"cmdstat_{command}", {}).get("calls", 0)
    return total


async def test_the_moving_window_is_the_modules_exact_sliding_log(topology):
    uri, options, nodes, strategy = topology
    storage = storage_from_string(uri, **options)
    limiter = strategy.MovingWindowRateLimiter(storage)
    item = RateLimitItemPerMinute(3)

    stats = await wait(limiter.get_window_stats(item, "k"))
    assert (stats.reset_time, stats.remaining) == (NOW + 60, 3)  # as limits: empty, now + expiry
    assert await wait(limiter.hit(item, "k"))
    advance(nodes, 10_000)
    assert await wait(limiter.test(item, "k", cost=2))
    assert await wait(limiter.hit(item, "k", cost=2))
    assert not await wait(limiter.test(item, "k"))
    assert not await wait(limiter.hit(item, "k"))
    # The window resets when its oldest hit frees: 50 s from now, on the application's clock.
    stats = await wait(limiter.get_window_stats(item, "k"))
    assert (stats.reset_time, stats.remaining) == (NOW + 50, 0)
    advance(nodes, 50_000)
    stats = await wait(limiter.get_window_stats(item, "k"))
    assert (stats.reset_time, stats.remaining) == (NOW + 10, 1)
    assert not await wait(limiter.hit(item, "k", cost=2))
    assert await wait(limiter.hit(item, "k"))
    assert not await wait(limiter.hit(item, "k", cost=4)), "more than the limit"
    assert calls(nodes, "eval") + calls(nodes, "evalsha") == 0, "no script for a moving window"


async def test_exact_to_the_millisecond_within_the_modules_bound(topology):
    uri, options, nodes, strategy = topology
    limiter = strategy.MovingWindowRateLimiter(storage_from_string(uri, **options))
    advance(nodes, 7)  # off any bucket's edge: a bucketed log would say a later reset
    for limit in (5, 101, 4096):
        item = RateLimitItemPerMinute(limit)
        assert await wait(limiter.hit(item, "u"))
        stats = await wait(limiter.get_window_stats(item, "u"))
        assert stats.remaining == limit - 1
        assert stats.reset_time == pytest.approx(NOW + 60, abs=1e-6), limit
    # Above the module's bound of 4 096 entries a minute's log has buckets of 15 ms: a hit
    # leaves at most 15 ms late, never early.
    item = RateLimitItemPerMinute(10**6)
    assert await wait(limiter.hit(item, "u"))
    stats = await wait(limiter.get_window_stats(item, "u"))
    assert stats.remaining == 10**6 - 1
    assert NOW + 60 <= stats.reset_time < NOW + 60.015


async def test_one_command_per_hit_and_per_read(topology):
    uri, options, nodes, strategy = topology
    limiter = strategy.MovingWindowRateLimiter(storage_from_string(uri, **options))
    item = RateLimitItemPerSecond(10)
    before = (calls(nodes, "ratelimit.allow"), calls(nodes, "ratelimit.peek"))
    for _ in range(4):
        await wait(limiter.hit(item, "user"))
    for _ in range(3):
        await wait(limiter.get_window_stats(item, "user"))
    after = (calls(nodes, "ratelimit.allow"), calls(nodes, "ratelimit.peek"))
    assert (after[0] - before[0], after[1] - before[1]) == (4, 3)


async def test_a_limiter_per_key_that_expires_once_idle_and_clears(topology):
    uri, options, nodes, strategy = topology
    storage = storage_from_string(uri, **options)
    limiter = strategy.MovingWindowRateLimiter(storage)
    fixed = strategy.FixedWindowRateLimiter(storage)
    item = RateLimitItemPerMinute(5)
    assert await wait(limiter.hit(item, "a{b}c"))
    assert await wait(fixed.hit(item, "a{b}c"))
    name = f"LIMITS:ratelimit:{item.key_for('a%7Bb%7Dc')}"
    # One key per limiter (ONEKEY), its name without a hash tag: spread over the slots by name.
    keys = {key for node in nodes for key in node.keys("*")}
    assert keys == {
        name.encode(),
        f"LIMITS:{item.key_for('a{b}c')}".encode(),  # the fixed window: limits' own key
    }
    node = next(n for n in nodes if n.exists(name))
    assert node.type(name) == b"string"
    config = node.execute_command("RATELIMIT.CONFIG", name)
    config = config if isinstance(config, dict) else dict(zip(config[::2], config[1::2]))
    assert config == {
        b"rate": 5,
        b"interval": 60000,
        b"type": b"ONEKEY",
        b"keepAliveTime": 60000,
    }
    assert 0 < node.pttl(name) <= 60_000
    await wait(limiter.clear(item, "a{b}c"))
    assert {key for node in nodes for key in node.keys("*")} == set()


async def test_reset_deletes_the_limiters_too(topology):
    uri, options, nodes, strategy = topology
    storage = storage_from_string(uri, **options)
    limiter = strategy.MovingWindowRateLimiter(storage)
    fixed = strategy.FixedWindowRateLimiter(storage)
    for user in ["a", "b", "c", "d"]:
        assert await wait(limiter.hit(RateLimitItemPerMinute(5), user))
        assert await wait(fixed.hit(RateLimitItemPerMinute(5), user))
    for node in nodes:  # a key of the application's, on its node
        try:
            node.set("mine", "x")
            break
        except redis.exceptions.MovedError:
            continue
    # Per user: limits' counter and the limiter's one key.
    assert await wait(storage.reset()) == 8
    assert [key for node in nodes for key in node.keys("*")] == [b"mine"]


async def test_a_switch_beside_limits_own_storage_shares_no_key(topology):
    """During a rolling switch of storage_uri, servers on redis:// and on ratelimit:// write
    their moving windows under different keys: neither answers WRONGTYPE."""
    uri, options, nodes, strategy = topology
    theirs_uri = uri.replace("ratelimit", "redis")
    ours = strategy.MovingWindowRateLimiter(storage_from_string(uri, **options))
    if theirs_uri.startswith("async+"):
        options = {**options, "implementation": "redispy"}
    theirs = strategy.MovingWindowRateLimiter(storage_from_string(theirs_uri, **options))
    item = RateLimitItemPerMinute(2)
    for _ in range(2):
        assert await wait(ours.hit(item, "u"))
        assert await wait(theirs.hit(item, "u"))
    assert not await wait(ours.hit(item, "u"))
    assert not await wait(theirs.hit(item, "u"))


def test_the_schemes_are_registered_by_the_import():
    assert ratelimit_limits.__version__
    assert isinstance(
        storage_from_string("ratelimit://127.0.0.1:1"), ratelimit_limits.RatelimitStorage
    )
    assert isinstance(storage_from_string("ratelimit://127.0.0.1:1"), RedisStorage)
    assert isinstance(
        storage_from_string("async+ratelimit://127.0.0.1:1"),
        ratelimit_limits.AsyncRatelimitStorage,
    )


def test_asyncio_runs_on_redis_py_only():
    from limits.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        storage_from_string("async+ratelimit://127.0.0.1:1", implementation="coredis")


@pytest.mark.parametrize(
    "reply",
    [
        [b"allowed", 1, b"limit", 3, b"remaining", 0, b"retry_after", 0, b"reset_after", 9,
         b"oldest_after", 5],
        {b"allowed": 1, b"limit": 3, b"remaining": 0, b"retry_after": 0, b"reset_after": 9,
         b"oldest_after": 5},
        {"allowed": 1, "limit": 3, "remaining": 0, "retry_after": 0, "reset_after": 9,
         "oldest_after": 5},
    ],
    ids=["resp2", "resp3", "decoded"],
)
def test_peek_replies_in_every_protocol_read_alike(reply):
    assert _window.moving_window(reply, 60, NOW) == (NOW + 0.005 - 60, 3)
