"""A Flask app limited by Flask-Limiter on the ratelimit module: 5 requests a minute per user,
as a moving window (the module's exact sliding log).

    RATELIMIT_STORAGE_URI=ratelimit://127.0.0.1:6379 flask --app flask_app run
    curl -i -H 'X-User: alice' http://127.0.0.1:5000/

The switch from limits' own Redis storage is the import and the URI's scheme: `redis://` becomes
`ratelimit://`, `redis+cluster://` becomes `ratelimit+cluster://`.
"""

import os

from flask import Flask, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

import ratelimit_limits  # noqa: F401  (registers ratelimit:// with limits)

STORAGE_URI = os.environ.get("RATELIMIT_STORAGE_URI", "ratelimit://127.0.0.1:6379")


def user():
    """The caller: the X-User header here (your authenticated user in a real app)."""
    return request.headers.get("X-User") or get_remote_address()


app = Flask(__name__)
limiter = Limiter(
    user,
    app=app,
    storage_uri=STORAGE_URI,
    strategy="moving-window",
    headers_enabled=True,
    default_limits=["5 per minute"],
)


@app.route("/")
def hello():
    return f"hello {user()}\n"

