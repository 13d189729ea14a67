"""The reconcile's story against the real API server, seen through a Reader that counts
its reads and the parent's writes: a poll syncs a new revision and then heals it, a recheck
after watch events fetches nothing and heals only when enforcing, a revision whose
dependencies are not ready writes nothing, and a standby only reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd import inventory
from gitopsd.changes import Action, Listener
from gitopsd.cluster import Cluster
from gitopsd.config import SourceSpec, SyncSettings
from gitopsd.objects import Body
from gitopsd.reconcile import Intent, ListReader, Live, Pass, Source, State, Step, read_only
from gitopsd.reconcile import reconcile_once as reconcile
from gitopsd.reconcile.live import Targets
from tests.harness.controlplane import ControlPlane
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import unique_name


@dataclass
class CountingReader:
    """The CLI's reader, counting what the story asks of it."""

    inner: ListReader
    reads: int = 0
    parent_writes: int = 0

    def read(self, applyset: inventory.ApplySet, targets: Targets) -> Live:
        self.reads += 1
        return self.inner.read(applyset, targets)

    def written(self, answer: Body | None) -> None:
        self.parent_writes += 1


@dataclass
class Heard:
    """What the story told its caller."""

    fetches: int = 0
    revisions: list[str] = field(default_factory=list)

    def listener(self) -> Listener:
        return Listener(
            on_fetched=lambda seconds: self._fetched(),
            on_revision=self.revisions.append,
        )

    def _fetched(self) -> None:
        self.fetches += 1


@dataclass
class Story:
    source: Source
    cluster: Cluster
    reader: CountingReader
    state: State = field(default_factory=State)
    heard: Heard = field(default_factory=Heard)
    waiting: str = ""
    """Why the source's dependencies hold a new revision back, as its caller says."""

    def run(self, kind: Pass) -> Any:
        intent = Intent(kind, dependencies_waiting=lambda: self.waiting)
        listener = self.heard.listener()
        return reconcile(self.source, self.cluster, self.reader, self.state, intent, listener)


@pytest.fixture
def told(
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> Story:
    """The story of a revision of two ConfigMaps, synced into `namespace`."""
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {}\ndata:\n  k: v\n"
    git_repo.commit({f"{name}.yaml": manifest.format(name) for name in ("one", "two")})
    settings = SyncSettings(
        unique_name("story"), inventory_namespace=namespace, default_namespace=namespace
    )
    spec = SourceSpec(git_server.file_url(git_repo), allow_insecure=True)
    source = Source(spec, settings, tmp_path)
    cluster = Cluster.connect(str(control_plane.kubeconfig))
    return Story(source, cluster, CountingReader(ListReader(cluster)))


def data_of(admin_api: Any, namespace: str, name: str) -> Any:
    return client.CoreV1Api(admin_api).read_namespaced_config_map(name, namespace).data


def test_a_poll_syncs_a_new_revision_then_heals_it_and_a_recheck_fetches_nothing(
    told: Story, admin_api: Any, namespace: str
) -> None:

    synced = told.run(Pass.ENFORCE)
    assert synced.step == Step.SYNC
    assert [o.action for o in synced.report.changes.outcomes] == [Action.CREATED] * 2
    assert told.state.applied_revision == synced.desired.revision.sha
    assert told.reader.parent_writes == 1  # the record and the stamps, in one write

    again = told.run(Pass.ENFORCE)
    assert (again.step, again.report, again.drifts) == (Step.HEAL, None, [])
    assert told.heard.fetches == 2 and len(told.heard.revisions) == 1  # its files read once
    assert told.reader.parent_writes == 1

    edit = {"data": {"k": "edited by a person"}}
    client.CoreV1Api(admin_api).patch_namespaced_config_map("one", namespace, edit)
    observed = told.run(Pass.RECHECK)
    assert [(str(d.key.name), d.state) for d in observed.drifts] == [("one", "modified")]
    assert observed.report is None
    assert data_of(admin_api, namespace, "one") == {"k": "edited by a person"}

    healed = told.run(Pass.HEAL)
    assert healed.step == Step.HEAL
    changed = [(o.key.name, o.action) for o in healed.report.changes.outcomes]
    assert changed == [("one", Action.CONFIGURED)]
    assert data_of(admin_api, namespace, "one") == {"k": "v"}
    assert told.heard.fetches == 2  # rechecks measure the revision held
    assert told.reader.reads == 4


def test_a_revision_waiting_for_its_dependencies_and_a_standby_write_nothing(
    told: Story, admin_api: Any, namespace: str
) -> None:
    told.waiting = "source base: its last reconcile failed (Unreachable)"

    held = told.run(Pass.ENFORCE)
    assert (held.step, held.report, held.waiting) == (Step.NONE, None, told.waiting)
    assert {d.state for d in held.drifts} == {"missing"}
    read_only(told.source, told.cluster, told.reader, told.state, told.heard.listener(), True)

    found: Any = client.CoreV1Api(admin_api).list_namespaced_config_map(namespace).items
    assert {cm.metadata.name for cm in found} <= {"kube-root-ca.crt"}  # the CA publisher's
    assert told.state.applied_revision is None
    assert (told.reader.reads, told.reader.parent_writes) == (2, 0)


def test_a_check_made_on_a_read_that_a_write_overtook_measures_the_object_as_it_is_now(
    told: Story, admin_api: Any, namespace: str
) -> None:
    """As a drift check that reads the watch cache before its own heal's event arrived:
    the object changed after it was read, and the dry-run says so by its version."""
    told.run(Pass.ENFORCE)
    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("one", namespace, {"data": {"k": "edited by a person"}})
    told.reader = OvertakenReader(told.reader.inner, admin_api=admin_api, namespace=namespace)

    checked = told.run(Pass.HEAL)

    assert (checked.drifts, checked.report) == ([], None)  # no heal of what is healed
    assert data_of(admin_api, namespace, "one") == {"k": "v"}


@dataclass
class OvertakenReader(CountingReader):
    """Reads, then git's value is written back to ConfigMap one: what it read is stale."""

    admin_api: Any = None
    namespace: str = ""

    def read(self, applyset: inventory.ApplySet, targets: Targets) -> Live:
        live = super().read(applyset, targets)
        healed = {"data": {"k": "v"}}
        client.CoreV1Api(self.admin_api).patch_namespaced_config_map("one", self.namespace, healed)
        return live
