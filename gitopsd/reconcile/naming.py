"""What a sync is when nobody names it: its target (`gitopsd.target_identity`), told from
where its source lives, and the source name derived from that target, today's and the one
earlier versions gave (under which `reconcile.records` finds their records)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from gitopsd import source
from gitopsd.config import SourceSpec, is_local, target_of
from gitopsd.target_identity import TargetIdentity, Tool


def target_identity(spec: SourceSpec, namespace: str, tool: Tool) -> TargetIdentity:
    """The target a sync of `spec` into `namespace` is. A local checkout is its repository's
    remote and its paths from the repository's root, so two checkouts of it (two CI
    workspaces) and the daemon syncing that repository are one target; a directory outside
    git is known by its absolute path."""
    checkout = source.checkout_of(Path(spec.url)) if is_local(spec.url) else None
    return target_of(spec, namespace, tool, checkout)


def default_name(spec: SourceSpec, identity: TargetIdentity) -> str:
    """A stable source name: its base name plus a hash of its target's identity, so two
    targets never share a record (`gitopsd.target_identity`)."""
    return f"{_base_name(spec)}-{identity.digest()}"


def earlier_default_name(spec: SourceSpec) -> str:
    """The name gitopsd gave the source before targets were told apart: its base name plus
    a hash of its source and paths only (`reconcile.records` finds records kept under it)."""
    where = spec.url
    if spec.helm.chart:
        where = f"{spec.url}\n{spec.helm.chart}"
    elif is_local(spec.url):
        where = source.checkout_identity(Path(spec.url)) or spec.url
    digest = hashlib.sha256(f"{where}\n{sorted(spec.paths)}".encode()).hexdigest()[:8]
    return f"{_base_name(spec)}-{digest}"


def _base_name(spec: SourceSpec) -> str:
    """The directory's, repository's or chart's name, as a name may hold it."""
    named = spec.helm.chart or Path(spec.url.rstrip("/")).name
    base = re.sub(r"[^a-z0-9-]+", "-", named.lower().removesuffix(".git"))
    return base.strip("-")[:30] or "source"
