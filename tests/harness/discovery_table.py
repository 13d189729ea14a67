"""A cluster's discovery as a table, for the pure tests of resolving: it serves these
resources (by apiVersion and kind), and nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field

from gitopsd.objects import Resource


@dataclass
class Table:
    resources: dict[tuple[str, str], Resource] = field(default_factory=dict)
    failed_groups: frozenset[str] = frozenset()

    def find(self, api_version: str, kind: str) -> Resource | None:
        return self.resources.get((api_version, kind))

    def served_versions(self, api_version: str, kind: str) -> list[str]:
        return []
