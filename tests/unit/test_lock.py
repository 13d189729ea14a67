"""SE-21: the locked dependency set (requirements/, written by `make lock`) that CI and the image
install: it must satisfy pyproject.toml's ranges, which library users get, and pin every
package with its hashes, so that two fresh installs are the same install."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.supply_chain.advisories import pins

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
RUNTIME = (ROOT / "requirements" / "runtime.txt").read_text()
DEV = (ROOT / "requirements" / "dev.txt").read_text()


PINNED_WITH_HASHES = re.compile(r"^[A-Za-z0-9._-]+==\S+ \\\n    --hash=sha256:[0-9a-f]{64}")


def locked(lock: str) -> dict[str, str]:
    return {canonicalize_name(pin.name): pin.version for pin in pins(lock)}


@pytest.mark.case("SE-21")
def test_every_dependency_is_locked_within_its_range() -> None:
    for lock, required in (
        (RUNTIME, PROJECT["dependencies"]),
        (DEV, PROJECT["dependencies"] + PROJECT["optional-dependencies"]["dev"]),
    ):
        versions = locked(lock)
        for line in required:
            requirement = Requirement(line)
            name = canonicalize_name(requirement.name)
            assert name in versions, f"{name} is not locked: make lock"
            assert requirement.specifier.contains(versions[name]), f"{name}: make lock"


@pytest.mark.case("SE-21")
def test_the_dev_set_installs_the_runtime_set_unchanged() -> None:
    runtime, dev = locked(RUNTIME), locked(DEV)
    assert {name: dev.get(name) for name in runtime} == runtime


@pytest.mark.case("SE-21")
def test_every_pin_carries_hashes_and_nothing_else_is_named() -> None:
    for lock in (RUNTIME, DEV):
        body = "\n".join(line for line in lock.splitlines() if not line.startswith("#"))
        entries = re.split(r"\n(?=\S)", body.strip())
        assert len(entries) == len(pins(lock))
        for entry in entries:
            assert PINNED_WITH_HASHES.match(entry), entry
        assert "--find-links" not in lock and "--index-url" not in lock
