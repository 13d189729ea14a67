"""`gitopsd history NAME`: a source's last syncs, as `argocd app history` lists an app's. A
GitSync's are read from its status in the cluster (no daemon needed), a daemon's
configured source's from that daemon's control API, or, `--in-cluster`, from its status
ConfigMap."""

from __future__ import annotations

import argparse

from gitopsd.cli import documents, in_cluster
from gitopsd.cli.commands import connect
from gitopsd.cli.control import ask_source, namespace_of, read_gitsync
from gitopsd.cli.render import emit, history_table
from gitopsd.errors import ExitCode
from gitopsd.gitsync import status_map
from gitopsd.gitsync.status import Document


def run_history(arguments: argparse.Namespace) -> int:
    if arguments.gitsync:
        source, entries = _gitsync_history(arguments)
    elif arguments.in_cluster:
        source, entries = _kept_history(arguments)
    else:
        source, entries = _source_history(arguments)
    if arguments.output == "text":
        emit(history_table(entries))
    else:
        emit(documents.serialized(documents.sync_history(source, entries), arguments.output))
    return ExitCode.OK


def _gitsync_history(arguments: argparse.Namespace) -> tuple[Document, list[Document]]:
    cluster = connect(arguments)
    namespace = namespace_of(arguments, cluster)
    status = read_gitsync(cluster, namespace, arguments.name).get("status") or {}
    source = documents.source_reference("GitSync", namespace, arguments.name)
    return source, list(status.get("history") or [])


def _kept_history(arguments: argparse.Namespace) -> tuple[Document, list[Document]]:
    """A configured source's, from its status ConfigMap: no daemon need be reached."""
    found = in_cluster.status_map_of(connect(arguments), arguments.in_cluster, arguments.name)
    history = status_map.status(found).get("history") or []
    return documents.source_reference("Source", "", arguments.name), list(history)


def _source_history(arguments: argparse.Namespace) -> tuple[Document, list[Document]]:
    found = ask_source(arguments.daemon, "GET", arguments.name, "history")
    return documents.source_reference("Source", "", arguments.name), found["history"]
