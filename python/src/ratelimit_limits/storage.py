"""limits storages (sync) on the ratelimit module: `ratelimit://` and `ratelimit+cluster://`.

The moving window is served by the module's sliding log (one RATELIMIT.ALLOW per hit, one
RATELIMIT.PEEK per read); fixed window and sliding window counter go through limits' own Redis
storage code, on the same client.
"""

from __future__ import annotations

from limits.storage import RedisClusterStorage, RedisStorage

from . import _window

#: `ratelimit://` -> `redis://` and so on: what redis-py's `from_url` is given.
_BASIC_SCHEMES = {
    "ratelimit://": "redis://",
    "ratelimits://": "rediss://",
    "ratelimit+unix://": "unix://",
}


def _redis_uri(uri: str) -> str:
    for ours, theirs in _BASIC_SCHEMES.items():
        if uri.startswith(ours):
            return theirs + uri[len(ours) :]
    return uri


class _ModuleMovingWindow:
    """The moving window on the module, for a storage whose `get_connection()` is a redis-py
    client (a `Redis` or a `RedisCluster`: every call names one key, so a cluster client sends it
    straight to that key's master)."""

    key_prefix: str

    def _limiter(self, key: str) -> str:
        return _window.limiter_name(self.key_prefix, key)

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Takes `amount` hits now if the window has room: one RATELIMIT.ALLOW."""
        if amount > limit:
            return False
        if amount <= 0:
            return True
        args = _window.allow_args(self._limiter(key), limit, expiry, amount)
        return bool(_window.fields(self.get_connection().execute_command(*args))["allowed"])

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """(start of the window, hits in it): one RATELIMIT.PEEK, atomic and read-only."""
        try:
            reply = self.get_connection().execute_command(*_window.peek_args(self._limiter(key)))
        except self.dependency.ResponseError as error:
            if _window.is_not_initialized(error):
                return _window.now(), 0
            raise
        return _window.moving_window(reply, expiry, _window.now())

    def clear(self, key: str) -> None:
        """Clears limits' own key (fixed window) and the module's limiter of the same key."""
        super().clear(key)
        self.get_connection().execute_command(_window.DELETE, self._limiter(key))


class RatelimitStorage(_ModuleMovingWindow, RedisStorage):
    """`ratelimit://[[username]:password@]host:port[/db]` (also `ratelimits://` for TLS and
    `ratelimit+unix:///path/to/socket`): a Redis server with the ratelimit module loaded.

    Takes every argument :class:`limits.storage.RedisStorage` takes; `options` go to
    :class:`redis.Redis`.
    """

    STORAGE_SCHEME = ["ratelimit", "ratelimits", "ratelimit+unix"]

    def __init__(self, uri: str, **options) -> None:
        super().__init__(_redis_uri(uri), **options)

class RatelimitClusterStorage(_ModuleMovingWindow, RedisClusterStorage):
    """`ratelimit+cluster://[[username]:password@]host:port[,host:port...]`: a Redis Cluster
    whose nodes have the ratelimit module loaded. Each call goes to the master of its key's slot.

    Takes every argument :class:`limits.storage.RedisClusterStorage` takes; `options` go to
    :class:`redis.cluster.RedisCluster`.
    """

    STORAGE_SCHEME = ["ratelimit+cluster"]
