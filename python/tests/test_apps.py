"""The example apps, as they ship (examples/), with their real libraries: Flask with
Flask-Limiter and FastAPI with SlowAPI, on a real server and on a real 3-master cluster. Each
answers 200 five times a minute per user with the library's X-RateLimit-* headers, then 429 with
Retry-After, and never makes a node answer MOVED, ASK or CROSSSLOT. Time is the module's frozen
clock: the window frees exactly when the clock is moved a minute on."""

from __future__ import annotations

import importlib.util
import math
import os
import time

import pytest
from conftest import advance
from fastapi.testclient import TestClient
from servers import no_redirections

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
USERS = [f"user{i}" for i in range(12)]


def load(name: str, storage_uri: str, monkeypatch):
    """The example module `name`, imported afresh with RATELIMIT_STORAGE_URI set."""
    monkeypatch.setenv("RATELIMIT_STORAGE_URI", storage_uri)
    spec = importlib.util.spec_from_file_location(
        f"{name}_{abs(hash(storage_uri))}", os.path.join(EXAMPLES, f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def flask_client(storage_uri, monkeypatch):
    return load("flask_app", storage_uri, monkeypatch).app.test_client()


def fastapi_client(storage_uri, monkeypatch):
    return TestClient(load("fastapi_app", storage_uri, monkeypatch).app)


APPS = [pytest.param(flask_client, id="flask"), pytest.param(fastapi_client, id="fastapi")]


def get(client, user):
    return client.get("/", headers={"X-User": user})


def check_a_user_is_limited_at_the_sixth_request(client, clients):
    started = time.time()
    for remaining in [4, 3, 2, 1, 0]:
        response = get(client, "alice")
        assert response.status_code == 200, response.text
        assert response.headers["X-RateLimit-Limit"] == "5"
        assert response.headers["X-RateLimit-Remaining"] == str(remaining)
    refused = get(client, "alice")
    ended = time.time()
    assert refused.status_code == 429
    assert refused.headers["X-RateLimit-Limit"] == "5"
    assert refused.headers["X-RateLimit-Remaining"] == "0"
    assert "Retry-After" in refused.headers
    # The server's clock is frozen: every hit is logged at the same millisecond, so the oldest
    # frees a minute from now, on the application's clock (limits' reset times are epoch
    # seconds of the client): between a minute after the first request and after the refusal.
    # (Flask-Limiter sends whole seconds; SlowAPI the float, plus one second.)
    reset = float(refused.headers["X-RateLimit-Reset"])
    assert math.floor(started + 60) <= reset <= ended + 60 + 1
    # Others have limits of their own.
    for user in USERS:
        response = get(client, user)
        assert response.status_code == 200
        assert response.headers["X-RateLimit-Remaining"] == "4"
    # A minute later (on the module's clock) alice's hits have left the window.
    advance(clients, 60_000)
    response = get(client, "alice")
    assert response.status_code == 200
    assert response.headers["X-RateLimit-Remaining"] == "4"


def limiters(clients):
    """Each node's module limiters (one string key each), with their configuration."""
    found = []
    for node, client in enumerate(clients):
        for name in client.keys("LIMITS:ratelimit:*"):
            assert client.type(name) == b"string"
            config = client.execute_command("RATELIMIT.CONFIG", name)
            config = config if isinstance(config, dict) else dict(zip(config[::2], config[1::2]))
            assert config[b"rate"] == 5 and config[b"interval"] == 60_000
            assert config[b"type"] == b"ONEKEY"
            assert 0 < client.pttl(name) <= 60_000
            found.append((node, name))
    return found


@pytest.mark.parametrize("make_client", APPS)
def test_an_app_on_one_server(make_client, redis_server, monkeypatch):
    client = make_client(f"ratelimit://127.0.0.1:{redis_server.port}", monkeypatch)
    redis = redis_server.client()
    check_a_user_is_limited_at_the_sixth_request(client, [redis])
    found = limiters([redis])
    assert len(found) == 1 + len(USERS)
    assert any(b"alice" in name for _, name in found)


@pytest.mark.parametrize("make_client", APPS)
def test_an_app_on_a_cluster(make_client, redis_cluster, monkeypatch):
    client = make_client(f"ratelimit+cluster://{redis_cluster.seeds}", monkeypatch)
    nodes = redis_cluster.clients()
    check_a_user_is_limited_at_the_sixth_request(client, nodes)
    found = limiters(nodes)
    assert len(found) == 1 + len(USERS)
    assert len({node for node, _ in found}) == 3, "every master holds limiters"
    assert no_redirections(redis_cluster.errorstats()) == []
