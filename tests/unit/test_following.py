"""A declared cluster's kubeconfig followed: a rotated token is taken, nothing else is, and
a file caught broken keeps the credentials in use. Against the official client's own
configuration and loader."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from gitopsd.cluster.connect import api_client
from gitopsd.cluster.following import Followed


def write(path: Path, token: str, server: str = "https://127.0.0.1:6443", **user: Any) -> None:
    """A kubeconfig as the kubelet updates a mounted Secret: a new file renamed into place."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user or {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    written = path.with_suffix(".new")
    written.write_text(json.dumps(config))
    written.replace(path)


def followed(path: Path) -> Followed:
    return Followed(path, None, False, api_client(str(path)).client.configuration)


def token(credentials: Followed) -> str:
    """The bearer token a request would send now (PooledTransport asks as this does)."""
    return str(credentials().auth_settings()["BearerToken"]["value"])


def test_a_token_rotated_in_the_file_is_taken_at_the_next_request(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    write(path, "first")
    credentials = followed(path)
    assert token(credentials) == "Bearer first"

    write(path, "second")
    assert token(credentials) == "Bearer second"
    assert token(credentials) == "Bearer second"


def test_threads_asking_at_once_take_the_rotated_token_and_keep_it(tmp_path: Path) -> None:
    """The loader's refresh hook writes the token of the file it read into its own
    configuration: a request in flight on the old one cannot bring the old token back."""
    path = tmp_path / "kubeconfig"
    write(path, "first")
    credentials = followed(path)
    write(path, "second")
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        for _ in range(200):
            token(credentials)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert token(credentials) == "Bearer second"


def test_a_changed_server_is_taken_at_the_next_start_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "kubeconfig"
    write(path, "first")
    credentials = followed(path)

    write(path, "elsewhere", server="https://192.0.2.1:6443")
    assert token(credentials) == "Bearer first"
    assert credentials().host == "https://127.0.0.1:6443"
    assert "changed its host: taken at the next start" in caplog.text
    assert "elsewhere" not in caplog.text


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        pytest.param(lambda p: p.write_text("users: [\n"), "changed and cannot be read", id="yaml"),
        pytest.param(
            lambda p: write(p, "", exec={"command": "/bin/true"}), "credential plugin", id="exec"
        ),
    ],
)
def test_a_file_that_cannot_be_read_keeps_the_credentials_in_use(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, broken: Any, says: str
) -> None:
    path = tmp_path / "kubeconfig"
    write(path, "first")
    credentials = followed(path)

    with caplog.at_level(logging.ERROR):
        broken(path)
        assert token(credentials) == "Bearer first"
    assert says in caplog.text

    write(path, "mended")  # read again at its next change
    assert token(credentials) == "Bearer mended"
