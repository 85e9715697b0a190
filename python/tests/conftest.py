"""Real servers for the package's own tests: one redis-server with the module and one 3-master
cluster of them, for the whole session (tests/../testing/servers.py)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "testing"))

import servers  # noqa: E402

#: The debug clock's start: 2026-01-01T00:00:00Z, in ms.
T0 = 1_767_225_600_000


@pytest.fixture(scope="session")
def server():
    running = servers.Server()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def cluster():
    running = servers.Cluster()
    yield running
    running.stop()


@pytest.fixture
def redis_server(server):
    """The server, emptied, its clock frozen at T0."""
    client = server.client()
    client.flushall()
    client.execute_command("RATELIMIT.DEBUG", "SETCLOCK", T0)
    client.config_resetstat()
    return server


@pytest.fixture
def redis_cluster(cluster):
    """The cluster, emptied, every node's clock frozen at T0 and its error counts reset."""
    for client in cluster.clients():
        client.flushall()
        client.execute_command("RATELIMIT.DEBUG", "SETCLOCK", T0)
        client.config_resetstat()
    return cluster


def advance(clients, ms: int) -> None:
    for client in clients:
        client.execute_command("RATELIMIT.DEBUG", "ADVANCE", ms)
