"""limits storages on the ratelimit Redis module.

Importing this package registers its URI schemes with limits (limits has no plug-in entry point:
a scheme is known once the class that declares it is defined)::

    import ratelimit_limits  # noqa: F401  (registers ratelimit:// and its kin)

    storage_uri = "ratelimit://127.0.0.1:6379"             # instead of redis://...
    storage_uri = "ratelimit+cluster://10.0.0.1:6379"      # instead of redis+cluster://...
    storage_uri = "async+ratelimit://127.0.0.1:6379"       # instead of async+redis://...
"""

from . import aio, storage
from .aio import RatelimitClusterStorage as AsyncRatelimitClusterStorage
from .aio import RatelimitStorage as AsyncRatelimitStorage
from .storage import RatelimitClusterStorage, RatelimitStorage

__version__ = "1.0.0"

__all__ = [
    "AsyncRatelimitClusterStorage",
    "AsyncRatelimitStorage",
    "RatelimitClusterStorage",
    "RatelimitStorage",
    "aio",
    "storage",
]
