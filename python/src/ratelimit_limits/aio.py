"""limits storages (asyncio) on the ratelimit module: `async+ratelimit://` and
`async+ratelimit+cluster://`, on redis-py's asyncio client. As :mod:`ratelimit_limits.storage`,
awaited."""

from __future__ import annotations

from limits.aio.storage import RedisClusterStorage, RedisStorage
from limits.errors import ConfigurationError

from . import _window

_SCHEMES = {
    "async+ratelimit+cluster://": "async+redis+cluster://",
    "async+ratelimit+unix://": "async+redis+unix://",
    "async+ratelimits://": "async+rediss://",
    "async+ratelimit://": "async+redis://",
}


def _redis_uri(uri: str) -> str:
    for ours, theirs in _SCHEMES.items():
        if uri.startswith(ours):
            return theirs + uri[len(ours) :]
    return uri


def _redispy(implementation: str) -> str:
    if implementation != "redispy":
        raise ConfigurationError(
            f"the ratelimit storages run on redis-py only, not {implementation!r}"
        )
    return implementation


class _ModuleMovingWindow:
    key_prefix: str

    def _limiter(self, key: str) -> str:
        return _window.limiter_name(self.bridge.key_prefix, key)

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Takes `amount` hits now if the window has room: one RATELIMIT.ALLOW."""
        if amount > limit:
            return False
        if amount <= 0:
            return True
        args = _window.allow_args(self._limiter(key), limit, expiry, amount)
        reply = await self.bridge.get_connection().execute_command(*args)
        return bool(_window.fields(reply)["allowed"])

    async def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """(start of the window, hits in it): one RATELIMIT.PEEK, atomic and read-only."""
        try:
            reply = await self.bridge.get_connection().execute_command(
                *_window.peek_args(self._limiter(key))
            )
        except self.bridge.dependency.ResponseError as error:
            if _window.is_not_initialized(error):
                return _window.now(), 0
            raise
        return _window.moving_window(reply, expiry, _window.now())

    async def clear(self, key: str) -> None:
        """Clears limits' own key (fixed window) and the module's limiter of the same key."""
        await super().clear(key)
        await self.bridge.get_connection().execute_command(_window.DELETE, self._limiter(key))


class RatelimitStorage(_ModuleMovingWindow, RedisStorage):
    """`async+ratelimit://host:port[/db]` (also `async+ratelimits://`,
    `async+ratelimit+unix://`): as :class:`ratelimit_limits.storage.RatelimitStorage`, on
    :class:`redis.asyncio.Redis`."""

    STORAGE_SCHEME = ["async+ratelimit", "async+ratelimits", "async+ratelimit+unix"]

    def __init__(self, uri: str, implementation: str = "redispy", **options) -> None:
        super().__init__(_redis_uri(uri), implementation=_redispy(implementation), **options)


class RatelimitClusterStorage(_ModuleMovingWindow, RedisClusterStorage):
    """`async+ratelimit+cluster://host:port[,host:port...]`: as
    :class:`ratelimit_limits.storage.RatelimitClusterStorage`, on
    :class:`redis.asyncio.RedisCluster`."""

    STORAGE_SCHEME = ["async+ratelimit+cluster"]

    def __init__(self, uri: str, implementation: str = "redispy", **options) -> None:
        super().__init__(_redis_uri(uri), implementation=_redispy(implementation), **options)
