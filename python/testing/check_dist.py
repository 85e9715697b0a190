"""Checks the release files of ratelimit-limits: the wheel's and the sdist's metadata and
contents, then installs each in a fresh venv (from PyPI: its dependencies, and for the sdist its
build backend) and uses it there.

    python check_dist.py target/dist/ratelimit_limits-1.0.0-py3-none-any.whl target/dist/ratelimit_limits-1.0.0.tar.gz
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile

NAME, VERSION = "ratelimit-limits", "1.0.0"
MODULES = ["__init__.py", "_window.py", "aio.py", "storage.py", "py.typed"]

USE = """
import importlib.metadata, ratelimit_limits
from limits.storage import storage_from_string
assert importlib.metadata.version("ratelimit-limits") == "1.0.0"
assert isinstance(storage_from_string("ratelimit://127.0.0.1:1"), ratelimit_limits.RatelimitStorage)
assert isinstance(storage_from_string("async+ratelimit+cluster://127.0.0.1:1"),
                  ratelimit_limits.AsyncRatelimitClusterStorage)
print("installed and registered:", ratelimit_limits.__file__)
"""


def check_metadata(text: str, where: str) -> None:
    meta = email.parser.Parser().parsestr(text)
    expect = {
        "Name": NAME,
        "Version": VERSION,
        "License-Expression": "MIT",
        "Requires-Python": ">=3.10",
        "Description-Content-Type": "text/markdown",
    }
    for field, value in expect.items():
        assert meta[field] == value, f"{where}: {field} is {meta[field]!r}, not {value!r}"
    assert meta["Summary"], f"{where}: no Summary"
    requires = sorted(meta.get_all("Requires-Dist") or [])
    assert requires == ["limits<6,>=5.0", "redis>=5.2"], f"{where}: Requires-Dist {requires}"
    assert "ratelimit://" in meta.get_payload(), f"{where}: the README is not the description"
    assert meta.get_all("Classifier"), f"{where}: no classifiers"


def check_wheel(path: str) -> None:
    with zipfile.ZipFile(path) as wheel:
        names = set(wheel.namelist())
        info = f"ratelimit_limits-{VERSION}.dist-info"
        for module in MODULES:
            assert f"ratelimit_limits/{module}" in names, f"{path}: no {module}"
        assert f"{info}/licenses/LICENSE" in names, f"{path}: no LICENSE"
        check_metadata(wheel.read(f"{info}/METADATA").decode(), path)


def check_sdist(path: str) -> None:
    root = f"ratelimit_limits-{VERSION}"
    with tarfile.open(path) as sdist:
        names = set(sdist.getnames())
        for member in ["pyproject.toml", "README.md", "LICENSE", "PKG-INFO"]:
            assert f"{root}/{member}" in names, f"{path}: no {member}"
        for module in MODULES:
            assert f"{root}/src/ratelimit_limits/{module}" in names, f"{path}: no {module}"
        check_metadata(sdist.extractfile(f"{root}/PKG-INFO").read().decode(), path)


def install_and_use(path: str) -> None:
    with tempfile.TemporaryDirectory(prefix="ratelimit-dist-") as venv:
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        python = os.path.join(venv, "bin", "python")
        pip = [python, "-m", "pip", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "install", os.path.abspath(path)], check=True)
        subprocess.run([*pip, "check"], check=True)
        subprocess.run([python, "-c", USE], check=True, cwd=venv)


if __name__ == "__main__":
    wheel, sdist = sys.argv[1:3]
    check_wheel(wheel)
    check_sdist(sdist)
    for release_file in (wheel, sdist):
        install_and_use(release_file)
    print("release files: metadata complete, each installs and registers its schemes")
