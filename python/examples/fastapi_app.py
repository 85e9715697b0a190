"""A FastAPI app limited by SlowAPI on the ratelimit module: 5 requests a minute per user, as a
moving window (the module's exact sliding log).

    RATELIMIT_STORAGE_URI=ratelimit://127.0.0.1:6379 uvicorn fastapi_app:app
    curl -i -H 'X-User: alice' http://127.0.0.1:8000/

The switch from limits' own Redis storage is the import and the URI's scheme: `redis://` becomes
`ratelimit://`, `redis+cluster://` becomes `ratelimit+cluster://`.
"""

import os

from fastapi import FastAPI, Request, Response
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address

import ratelimit_limits  # noqa: F401  (registers ratelimit:// with limits)

STORAGE_URI = os.environ.get("RATELIMIT_STORAGE_URI", "ratelimit://127.0.0.1:6379")


def user(request: Request) -> str:
    """The caller: the X-User header here (your authenticated user in a real app)."""
    return request.headers.get("X-User") or get_remote_address(request)


limiter = Limiter(
    key_func=user,
    storage_uri=STORAGE_URI,
    strategy="moving-window",
    headers_enabled=True,
)
app = FastAPI()
app.state.limiter = limiter
app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)


@app.get("/")
@limiter.limit("5/minute")
async def hello(request: Request, response: Response):
    return {"hello": user(request)}

