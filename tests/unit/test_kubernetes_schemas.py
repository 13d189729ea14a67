"""gitopsd/validation/kubernetes.json is what `make schemas` writes from the k8s.io/kubernetes
module that tests/controlplane/kube/go.sum pins (Go fetches it into its module cache, or
finds it there from the control plane's build): a hand edit, or a new pin without `make
schemas`, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import kubernetes_schemas

SHIPPED = Path(__file__).resolve().parents[2] / "gitopsd" / "validation" / "kubernetes.json"


def test_the_shipped_schemas_are_the_pinned_modules(capsys: pytest.CaptureFixture[str]) -> None:
    kubernetes_schemas.main()

    assert capsys.readouterr().out == SHIPPED.read_text(), "run `make schemas`"
