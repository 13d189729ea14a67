"""The ApplySet parent's writer for one pass, and the stamps a daemon's syncs leave waiting,
written when it stops (`keep_stamps`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress

from gitopsd import inventory
from gitopsd.cluster import Cluster
from gitopsd.config import SyncSettings
from gitopsd.errors import GitopsdError
from gitopsd.objects import Body
from gitopsd.reconcile.desired import applyset_of
from gitopsd.reconcile.enforce import ParentWriter
from gitopsd.reconcile.live import CacheReader
from gitopsd.reconcile.measure import DriftMemo


def parent_writer(
    cluster: Cluster,
    settings: SyncSettings,
    parent: Body | None,
    memo: DriftMemo,
    written: Callable[[Body | None], None],
    restamp: bool,
) -> ParentWriter:
    """The writer of `parent` as read, with the stamps of what the memo holds in sync."""
    return ParentWriter(
        cluster=cluster,
        settings=settings,
        applyset=applyset_of(settings),
        stamps=memo.stamps,
        stored_stamps=inventory.stored_stamps(parent),
        restamp=restamp,
        written=written,
        live=parent,
    )


def keep_stamps(
    cluster: Cluster, settings: SyncSettings, reader: CacheReader, memo: DriftMemo
) -> None:
    """Writes the stamps a daemon's syncs left waiting into the source's parent, as the
    source read or wrote it last (a stopping daemon's watches are gone), its record as it
    is: the stopping daemon's last write for the source (a record, as a stopping process
    still writes), so that the next one dry-runs only what changed since. Nothing is
    written without a parent, where it holds these stamps already, or from a view of the
    cluster gone stale; a stamp not written costs its object a dry-run, nothing more."""
    parent, applyset = reader.parent, applyset_of(settings)
    if reader.stale or parent is None or applyset.foreign(parent):
        return
    record = inventory.recorded(parent)
    writer = parent_writer(cluster.recording(), settings, parent, memo, reader.written, True)
    with suppress(GitopsdError):
        writer.write(record, record)
