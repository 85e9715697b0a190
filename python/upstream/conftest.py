"""Runs limits' own storage and strategy tests (the files under tests/ of limits' sdist, unedited,
which `make test-python` unpacks beside this file under target/) on the ratelimit storages,
against real servers started here instead of limits' docker-compose ones.

Not a file of limits: it replaces limits' tests/conftest.py (whose fixtures start docker
services). It starts a redis-server with the module and a 3-master cluster of them on free
loopback ports (tests/servers.py), then adds the ratelimit storages to the parameters limits'
tests already take: the storage lists of tests/utils.py and the storage table of each
TestConcreteStorages. `-m ratelimit` selects exactly those; limits' other storages would need
servers this file does not start.
"""

from __future__ import annotations

import os
import sys

import pytest
from pytest_lazy_fixtures import lf

# python/testing (its servers.py), named by make test-python: this file runs from a copy.
sys.path.insert(0, os.environ["RATELIMIT_PYTHON_TESTING"])

import ratelimit_limits  # noqa: E402  (the one line an application adds: registers the schemes)
import servers  # noqa: E402

SERVERS: dict = {}


def _params(server, cluster, asynchronous: bool):
    """Our storages as limits' parameters: (uri, args, fixture), marked `ratelimit`."""
    prefix = "async+" if asynchronous else ""
    mark = pytest.mark.ratelimit
    return {
        "ratelimit": pytest.param(
            f"{prefix}ratelimit://127.0.0.1:{server.port}", {}, lf("ratelimit_basic"),
            marks=mark, id="ratelimit",
        ),
        "ratelimit-resp2": pytest.param(
            f"{prefix}ratelimit://127.0.0.1:{server.port}", {"protocol": 2},
            lf("ratelimit_basic"), marks=mark, id="ratelimit-resp2",
        ),
        "ratelimit-cluster": pytest.param(
            f"{prefix}ratelimit+cluster://{cluster.seeds}", {}, lf("ratelimit_cluster"),
            marks=mark, id="ratelimit-cluster",
        ),
    }


def pytest_configure(config):
    config.addinivalue_line("markers", "ratelimit: the ratelimit module's storages")
    server = servers.Server()
    try:
        cluster = servers.Cluster()
    except BaseException:
        server.stop()
        raise
    SERVERS.update(server=server, cluster=cluster)

    import tests.utils as utils

    for asynchronous, table, moving in [
        (False, utils.ALL_STORAGES, utils.moving_window_storage),
        (True, utils.ALL_STORAGES_ASYNC, utils.async_moving_window_storage),
    ]:
        ours = _params(server, cluster, asynchronous)
        # all_storage and sliding_window_counter_storage iterate the table itself;
        # moving_window_storage holds a list made from it at import.
        table.update(ours)
        moving.mark.args[1].extend(ours.values())


def pytest_unconfigure(config):
    for running in SERVERS.values():
        running.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc):
    """TestConcreteStorages lists its storages inline, with the class each URI must make: ours
    join that list (once; the list is shared by the class's tests)."""
    asynchronous = metafunc.module.__name__.startswith("tests.aio")
    expected = (
        (ratelimit_limits.AsyncRatelimitStorage, ratelimit_limits.AsyncRatelimitClusterStorage)
        if asynchronous
        else (ratelimit_limits.RatelimitStorage, ratelimit_limits.RatelimitClusterStorage)
    )
    for marker in metafunc.definition.iter_markers("parametrize"):
        argnames, values = marker.args[0], marker.args[1]
        if argnames != "uri, args, expected_instance, fixture" or not isinstance(values, list):
            continue
        if any(getattr(v, "id", None) == "ratelimit" for v in values):
            continue
        ours = _params(SERVERS["server"], SERVERS["cluster"], asynchronous)
        for name, param in ours.items():
            uri, args, fixture = param.values
            kind = expected[1] if name.endswith("cluster") else expected[0]
            values.append(
                pytest.param(uri, args, kind, fixture, marks=param.marks, id=param.id)
            )


@pytest.fixture
def ratelimit_basic():
    client = SERVERS["server"].client()
    client.flushall()
    return client


@pytest.fixture
def ratelimit_cluster():
    for client in SERVERS["cluster"].clients():
        client.flushall()
    return SERVERS["cluster"]
