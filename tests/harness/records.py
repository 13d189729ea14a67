"""ApplySet parents, the records gitopsd keeps of what a source applied: their label and
annotation, the parents read back, and a record made as an earlier gitopsd left it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from gitopsd.config import SourceSpec
from gitopsd.reconcile.naming import earlier_default_name
from tests.harness.cli import Gitopsd

PART_OF = "applyset.kubernetes.io/part-of"
TARGET_ANNOTATION = "gitopsd.io/target"


def parents(admin_api: Any, namespace: str) -> dict[str, dict[str, str]]:
    """The ApplySet parents in `namespace`, each with its annotations."""
    core: Any = client.CoreV1Api(admin_api)
    found = core.list_namespaced_config_map(namespace, label_selector="applyset.kubernetes.io/id")
    return {item.metadata.name: item.metadata.annotations or {} for item in found.items}


def earlier_record(gitopsd: Gitopsd, admin_api: Any, at: Path, namespace: str) -> str:
    """A record as gitopsd wrote it before targets were told apart: the source's old
    default name, in `default`, without the target's identity. Made by a sync naming that
    place, then the one annotation this version adds taken off: the rest of the parent
    (labels, tooling, record) is written as it always was."""
    old = earlier_default_name(SourceSpec(str(at)))
    where = ("-n", namespace, "--name", old, "--inventory-namespace", "default")
    made = gitopsd("sync", str(at), *where)
    assert made.code == 0, made.text
    return without_identity(gitopsd, f"gitopsd-{old}")


def without_identity(gitopsd: Gitopsd, parent: str) -> str:
    """The parent in `default`, as a gitopsd that kept no target identity wrote it."""
    gitopsd.kubectl("annotate", "configmap", "-n", "default", parent, f"{TARGET_ANNOTATION}-")
    return parent
