"""`gitopsd check`, as `flux check`: whether gitopsd can work here, one line per check.

The cluster answers (with these credentials), its Kubernetes version is the one gitopsd is
tested against, this identity may do what a sync does in the namespace, the GitSync API of
this gitopsd is served (unless `--pre`), and helm and kubectl are where gitopsd looks for
them. The first check that failed decides the exit code: 2 when the configuration is at
fault (no kubeconfig or no such context, a program missing, a `--resource` the cluster does
not serve), else 4."""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from typing import TextIO

from gitopsd import gitsync, validation
from gitopsd.cli import documents
from gitopsd.cli.commands import connect
from gitopsd.cli.render import emit
from gitopsd.cluster import Cluster, Resource, kubeconfig_file
from gitopsd.errors import ClusterError, ClusterReason, ConfigError, ExitCode, GitopsdError
from gitopsd.resources import CONFIG_MAPS

SYNC_VERBS = ("get", "list", "watch", "create", "patch", "delete")
"""What a sync does to its objects and to its ApplySet parent (a ConfigMap): reads them
(a daemon watches), creates, applies (PATCH) and prunes them."""
PROGRAMS = {"helm": "charts", "kubectl": "kustomizations"}
"""What each renders, found on PATH as gitopsd.helm and gitopsd.kustomize find it."""


@dataclass(frozen=True)
class Check:
    name: str
    detail: str
    failure: GitopsdError | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def run_check(arguments: argparse.Namespace) -> int:
    checks = [*_cluster_checks(arguments), *(_program(name) for name in PROGRAMS)]
    failed = [check for check in checks if not check.ok]
    first = failed[0].failure if failed else None
    if arguments.output == "text":
        emit("".join(f"{_mark(c.ok, sys.stdout)} {c.name}: {c.detail}\n" for c in checks))
    else:
        found = documents.check_result([(c.name, c.ok, c.detail) for c in checks], first)
        emit(documents.serialized(found, arguments.output))
    if first is None:
        return ExitCode.OK
    names = ", ".join(check.name for check in failed)
    print(f"gitopsd: error: {len(failed)} of {len(checks)} checks failed: {names}", file=sys.stderr)
    return first.exit_code


def _cluster_checks(arguments: argparse.Namespace) -> list[Check]:
    """Those that ask the cluster: none past the first when it does not answer."""
    try:
        cluster = connect(arguments)
    except GitopsdError as error:  # no kubeconfig, or no such context: it says which
        return [Check("cluster", str(error), error)]
    found = kubeconfig_file(arguments.kubeconfig)
    read = f"; kubeconfig {found}" if found else ""
    try:
        cluster.discovery.refresh()  # needs credentials it accepts, as /version does not
    except GitopsdError as error:
        return [Check("cluster", f"{error}{read}", error)]
    namespace = arguments.namespace or cluster.namespace or "default"
    checks = [
        Check("cluster", f"{cluster.api.server} answers{read}"),
        _kubernetes(cluster),
        _rights(cluster, namespace, arguments.resources or []),
    ]
    return checks if arguments.pre else [*checks, gitsync_check(cluster)]


def _kubernetes(cluster: Cluster) -> Check:
    try:
        return version_check(cluster.discovery.kubernetes_version())
    except GitopsdError as error:
        return Check("kubernetes", str(error), error)


def version_check(server: str) -> Check:
    """As `flux check`: a version older than the one gitopsd is tested against fails (its
    API may lack what gitopsd uses); the tested minor passes (Kubernetes v1.34.4: v1.34.x,
    a distribution's build suffix included), and a newer one passes, said to be untested."""
    tested = validation.built_in().where.rpartition(" ")[2]
    minor = tested.rpartition(".")[0] + "."
    found, wanted = _minor(server), _minor(tested)
    if server.startswith(minor):
        return Check("kubernetes", f"{server}, of {minor}x, which gitopsd is tested against")
    if found is not None and wanted is not None and found > wanted:
        return Check(
            "kubernetes", f"{server}: newer than {minor}x, which gitopsd is tested against"
        )
    why = f"{server or 'no version'}: older than {minor}x, which gitopsd is tested against"
    return Check("kubernetes", why, ClusterError(why, ClusterReason.SERVER))


def _minor(version: str) -> tuple[int, int] | None:
    """(major, minor) of `v1.34.4` and its distributions' forms (`v1.34.2-eks-113cf36`)."""
    parts = version.removeprefix("v").split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def _rights(cluster: Cluster, namespace: str, named: list[str]) -> Check:
    """SelfSubjectAccessReviews for each verb a sync needs: on ConfigMaps (the ApplySet
    parent) and on each `--resource`, in the namespace (cluster-wide for a cluster-scoped
    resource)."""
    resources = [CONFIG_MAPS]
    for name in named:
        found = _served(cluster, name)
        if found is None:
            why = f"--resource {name}: the cluster serves no such resource (as kubectl names "
            why += "one: RESOURCE.GROUP, such as deployments.apps)"
            return Check("rights", why, ConfigError(why))
        resources.append(found)
    try:
        denied = {_resource_name(r): _denied(cluster, r, namespace) for r in resources}
    except GitopsdError as error:
        return Check("rights", str(error), error)
    return rights_check(denied, namespace)


def _denied(cluster: Cluster, resource: Resource, namespace: str) -> list[str]:
    where = namespace if resource.namespaced else ""
    return [verb for verb in SYNC_VERBS if not cluster.allowed(verb, resource, where)]


def rights_check(denied: dict[str, list[str]], namespace: str) -> Check:
    """Each resource with the verbs of a sync its identity may not use, if any."""
    where = f"in namespace {namespace}"
    refused = [f"{', '.join(verbs)} {name}" for name, verbs in denied.items() if verbs]
    if not refused:
        return Check("rights", f"may {', '.join(SYNC_VERBS)} {', '.join(denied)} {where}")
    why = f"may not {'; nor '.join(refused)} {where}"
    return Check("rights", why, ClusterError(why, ClusterReason.FORBIDDEN))


def _served(cluster: Cluster, name: str) -> Resource | None:
    plural, _, group = name.partition(".")
    resources = cluster.discovery.resources()
    return next((r for r in resources if (r.plural, r.group) == (plural, group)), None)


def _resource_name(resource: Resource) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


def gitsync_check(cluster: Cluster) -> Check:
    """Served, by discovery (which every identity may read, where the CRD may not be)."""
    api_version = f"{gitsync.GROUP}/{gitsync.VERSION}"
    ours = f"{gitsync.KIND} {api_version}, which this gitopsd reads"
    try:
        if cluster.discovery.find(api_version, gitsync.KIND) is not None:
            return Check("gitsync", f"{ours}, is served")
        served = cluster.discovery.served_versions(api_version, gitsync.KIND)
    except GitopsdError as error:
        return Check("gitsync", str(error), error)
    if served:
        why = f"the cluster serves {', '.join(served)}, not {ours}: apply its config/crd"
    else:
        why = (
            f"no {ours}: its CRD {gitsync.PLURAL}.{gitsync.GROUP} is not installed (kubectl "
            "apply -f config/crd/gitsyncs.yaml; operator mode needs it, --pre leaves it out)"
        )
    return Check("gitsync", why, ClusterError(why, ClusterReason.NOT_FOUND))


def _program(name: str) -> Check:
    found = shutil.which(name)
    if found is None:
        why = f"not on PATH: {PROGRAMS[name]} cannot be rendered"
        return Check(name, why, ConfigError(why))
    return Check(name, found)


def _mark(ok: bool, out: TextIO) -> str:
    """✔ and ✗ on a terminal that can show them; `ok` and `failed` for a program or a log."""
    symbols = out.isatty() and _encodes(out, "✔✗")
    if symbols:
        return "✔" if ok else "✗"
    return "ok    " if ok else "failed"


def _encodes(out: TextIO, text: str) -> bool:
    try:
        text.encode(out.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True
