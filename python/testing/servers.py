"""Real servers for the tests: redis-server (or valkey-server) with the ratelimit module, alone or
as a 3-master Redis Cluster, on free loopback ports, each in a directory of its own; stopped
afterwards.

REDIS_SERVER names the server binary (default `redis-server`), RATELIMIT_MODULE the module
(`make test-python` builds it and sets both). The module is loaded with `debug-commands yes` so
tests that need exact times freeze its clock (RATELIMIT.DEBUG); nothing else uses it.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time

import redis

#: Generous: only a server that never comes up waits this long (a hang, not a timing check).
HANG_S = 60


def server_binary() -> str:
    return os.environ.get("REDIS_SERVER", "redis-server")


def module_path() -> str:
    path = os.environ.get("RATELIMIT_MODULE")
    if not path or not os.path.exists(path):
        raise RuntimeError(
            "RATELIMIT_MODULE must name the built module (make test-python builds and sets it)"
        )
    return os.path.abspath(path)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A free loopback port any server can take, a cluster node included: at most 55535 (a
    node's bus port is 10 000 above its own, and the server refuses a port beyond that), with
    that bus port free too. The kernel's own pick (bind to 0) comes from the ephemeral range,
    up to 60999, and in sequence: once above 55535, every retry was too."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 55536)
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise RuntimeError("no free loopback port from 20000 to 55535 with its bus port free")


class Server:
    """One server with the module, started at once, on a free port."""

    def __init__(self, *extra: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="ratelimit-py-")
        for _ in range(5):
            self.port = free_port()
            args = [
                server_binary(),
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", self.dir,
                "--save", "",
                "--appendonly", "no",
                "--logfile", "server.log",
                "--loadmodule", module_path(), "debug-commands", "yes",
                *extra,
            ]
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
            if self._wait_up():
                return
        raise RuntimeError(f"the server never started:\n{self.log()}")

    def _wait_up(self) -> bool:
        deadline = time.monotonic() + HANG_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False  # the port was taken meanwhile: another try
            try:
                if self.client().ping():
                    return True
            except redis.ConnectionError:
                time.sleep(0.02)
        return False

    def client(self, **options) -> redis.Redis:
        return redis.Redis("127.0.0.1", self.port, **options)

    def log(self) -> str:
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(HANG_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    """Three masters with the module, slots split in three, every node agreeing on the map."""

    def __init__(self) -> None:
        self.nodes = [
            Server("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                   "--cluster-node-timeout", "5000")
            for _ in range(3)
        ]
        try:
            self._form()
        except BaseException:
            self.stop()
            raise

    def _form(self) -> None:
        ranges = [(0, 5460), (5461, 10922), (10923, 16383)]
        for node, (low, high) in zip(self.nodes, ranges):
            node.client().execute_command("CLUSTER", "ADDSLOTSRANGE", low, high)
        first = self.nodes[0].client()
        for node in self.nodes[1:]:
            first.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        deadline = time.monotonic() + HANG_S
        for node in self.nodes:
            while True:
                info = node.client().execute_command("CLUSTER", "INFO")
                info = info.decode() if isinstance(info, bytes) else str(info)
                if "cluster_state:ok" in info and "cluster_known_nodes:3" in info:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {node.port} never reached cluster_state:ok:\n{info}")
                time.sleep(0.05)

    @property
    def seeds(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def clients(self) -> list[redis.Redis]:
        return [node.client() for node in self.nodes]

    def errorstats(self) -> dict[str, dict]:
        """Each node's INFO errorstats, by port."""
        return {str(n.port): n.client().info("errorstats") for n in self.nodes}

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def no_redirections(stats: dict[str, dict]) -> list[str]:
    """Errors a well-routed client never causes, per node: MOVED, ASK, CROSSSLOT."""
    return [
        f"{port}: {name}={value}"
        for port, errors in stats.items()
        for name, value in errors.items()
        if any(kind in name for kind in ("MOVED", "ASK", "CROSSSLOT"))
    ]
