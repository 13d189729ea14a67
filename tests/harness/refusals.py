"""A repository that gitopsd must refuse: the program a hostile one names for a tool to run,
and the check that `validate` and `sync` both refuse it, naming why, and apply nothing."""

from __future__ import annotations

from typing import Any

from tests.harness.canary import Canary
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import INVALID, scope

HOSTILE_PROGRAM = (
    "#!/bin/sh\n"
    "case \"$1\" in version) printf 'v3.15.0\\n' ;;\n"
    "*) printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: pwned\\n' ;; esac\n"
)
"""A program a hostile repository names for a tool to run (a kustomize plugin, helm): run,
it prints a ConfigMap `pwned` (or, asked its version, a helm version) by the shell's
builtins alone, so its trace is in the rendered objects. Under a render's fence it cannot
start at all (the fence lets the render execute its own program only, and read no /bin/sh):
the tool's attempt to run it fails instead, and that failure is the trace."""


def assert_refused(
    gitopsd: Gitopsd,
    admin_api: Any,
    url: str,
    namespace: str,
    mentions: list[str],
    canaries: list[str] = [],  # noqa: B006 - never mutated
    flags: tuple[str, ...] = (),
) -> None:
    runs = {
        "validate": gitopsd("validate", url, "--allow-insecure-source", *flags),
        "sync": gitopsd("sync", url, *scope(namespace), *flags),
    }
    for command, run in runs.items():
        assert run.code == INVALID, f"{command}: {run.text}"
        for mention in mentions:
            assert mention in run.err, f"{command}: {mention!r} not in {run.err!r}"
        for canary in canaries:
            Canary(canary).assert_absent(run.text, command)
    assert config_map_names(admin_api, namespace) == set()
