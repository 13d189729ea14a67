"""What a chart download says when nothing answers it: how a plain-HTTP registry is read,
in words that are the same whatever the cause (the message is no port scanner)."""

from __future__ import annotations

import pytest

from gitopsd.errors import SourceReason
from gitopsd.source.download import no_answer

PLAIN = "a server that speaks plain HTTP is read only with --allow-insecure-source"


@pytest.mark.parametrize(
    ("url", "allow_insecure", "hinted"),
    [
        ("https://charts.example:8443/index.yaml", False, True),
        ("https://charts.example:8443/index.yaml", True, False),  # allowed: http:// reads it
        ("http://charts.example:8080/index.yaml", True, False),
    ],
)
def test_no_answer_names_the_plain_http_remedy_only_where_it_applies(
    url: str, allow_insecure: bool, hinted: bool
) -> None:
    error = no_answer("chart hello", url, allow_insecure)

    assert error.reason == SourceReason.UNREACHABLE
    assert str(error).startswith("chart hello: no HTTP answer from ")
    assert (PLAIN in str(error)) is hinted


def test_no_answer_hides_the_user_and_the_path() -> None:
    error = no_answer("chart hello", "https://me:token@charts.example/a/index.yaml", False)

    assert "token" not in str(error) and "/a/index.yaml" not in str(error)
