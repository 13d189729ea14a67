"""The hostile tenant of the tenants benchmark (tests/bench/tenants.py): its charts, its
GitSyncs at every bound its namespace has by default, and its commits while the other
tenant is measured."""

from __future__ import annotations

import threading
from typing import Any

from gitopsd.configfile.tenants import TenantQuota
from tests.harness.gitserver import GitRepo
from tests.harness.hostile_charts import RENDER_BOMB
from tests.harness.hostile_rules import slow_rule

QUOTA = TenantQuota()
"""The defaults: the attacker is measured at the bounds an install has unless set."""
HOARD_SPARE = 500
"""The hoard's revision holds this many objects fewer than tenantQuota.objects."""
CHURN_SECONDS = 5.0
"""How often the attacker commits to its charts while the victim is measured."""
OVER_QUOTA = "one-more"
"""The GitSync past tenantQuota.gitSyncs, refused."""

HOARD_TEMPLATE = (
    "{{- range until (int .Values.count) }}\n---\napiVersion: v1\nkind: ConfigMap\n"
    "metadata:\n  name: m-{{ . }}\ndata:\n  churn: {{ $.Values.churn | quote }}\n{{- end }}\n"
)
BOMB_TEMPLATE = RENDER_BOMB + "  churn: {{ .Values.churn | quote }}\n"
"""The render bomb, with a value that changes at every commit."""
RULED_OBJECTS = 40
"""ConfigMaps of the rules' GitSync, each assessed by a rule of half a second at every
commit it polls (one every CHURN_SECONDS): 20 s of the health rules' evaluator, twice its
namespace's share of a minute."""
RULE = {"apiVersion": "v1", "kind": "ConfigMap", "current": slow_rule()}


def hoard_size() -> int:
    return QUOTA.objects - HOARD_SPARE


def charts(churn: int) -> dict[str, str]:
    """The hoard's chart and the bomb's, each with a value that changes at every commit, so
    that each commit is a revision to render again."""
    files = {}
    for name, template in (("hoard", HOARD_TEMPLATE), ("bomb", BOMB_TEMPLATE)):
        files[f"{name}/Chart.yaml"] = f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n"
        files[f"{name}/templates/{name}.yaml"] = template
        files[f"{name}/values.yaml"] = f"churn: {churn}\ncount: 1\n"
    files["rules/Chart.yaml"] = "apiVersion: v2\nname: rules\nversion: 0.1.0\n"
    files["rules/templates/rules.yaml"] = HOARD_TEMPLATE
    files["rules/values.yaml"] = f"churn: {churn}\ncount: {RULED_OBJECTS}\n"
    return files


def gitsyncs(repository: str, trickling: str) -> dict[str, dict[str, Any]]:
    """The attacker's GitSyncs by name, as many as tenantQuota.gitSyncs and one more: the
    hoard (nearly tenantQuota.objects ConfigMaps, observe mode), the rules (slow health
    rules on objects each commit changes), one fetch from the chart server at `trickling`,
    and bombs; the last, OVER_QUOTA, a bomb. One fetch holds one of
    the namespace's tenantQuota.threads until network.fetchDeadline, and the other renders:
    with more fetches, they would hold both, and the bombs would wait (a first run had 12:
    no render while the victim was measured)."""
    hoard = {"paths": ["hoard"], "mode": "observe", "helm": {"values": {"count": hoard_size()}}}
    bomb: dict[str, Any] = {"repository": {"url": repository}, "paths": ["bomb"]}
    fetch = {"repository": {"url": trickling}, "helm": {"chart": "hello", "releaseName": "hello"}}
    fetches = 1
    found: dict[str, dict[str, Any]] = {"hoard": {"repository": {"url": repository}, **hoard}}
    rules = {"repository": {"url": repository}, "paths": ["rules"], "healthCheckExprs": [RULE]}
    found |= {"rules": rules} | {f"fetch-{n}": fetch for n in range(fetches)}
    found |= {f"bomb-{n}": bomb for n in range(QUOTA.git_syncs - 2 - fetches)}
    return found | {OVER_QUOTA: bomb}


class Churning:
    """The attacker's commits to its charts, every CHURN_SECONDS, while the block runs."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo, self.commits = repo, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._churn, name="churn", daemon=True)

    def __enter__(self) -> Churning:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    def _churn(self) -> None:
        while not self.done.wait(CHURN_SECONDS):
            self.commits += 1
            self.repo.commit(charts(churn=self.commits))
