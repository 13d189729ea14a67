"""Fetching desired state: the only package that runs git (in `runner`) or fetches charts.

A git source is kept as a persistent shallow bare repository under the cache directory,
one per URL, shared by every source and process that names that URL and guarded by a
file lock (`repository`); the daemon removes a repository no source reads any more, and
keeps them within bounds per tenant and in all (`git_cache`). `fetch` resolves the ref to
a commit and lists its files (`revision`). `tree` reads exactly that commit's files from
the object store by blob id, only those its reader asks for, and writes out only what
kustomize must read, into a private snapshot that nobody else writes to and that is
removed after use (`tree`, `snapshots`; `snapshot` writes out the whole commit). So two
sources on one URL (or a daemon and a CLI) never read each other's files. A daemon's
sources that read one ref of one cached repository share its fetches (`sharing`): one
fetch per interval, its new commit told to all of them, and what the first of them read
of it (its listing, its blobs) the others take without running git (`reads`).

The git host is treated as hostile (docs/ARCHITECTURE.md, Trust boundaries): the URL and ref pass an
allow-list before git runs (`policy`), git gets an environment built from nothing,
credentials reach it only through GIT_ASKPASS (`credentials`), and every error message is
scrubbed of URLs' userinfo and of the secret.

A chart from a Helm chart repository is a revision too (`charts`): the highest version a
range allows, checked against its digest and unpacked, bounded, into the cache, where the
daemon keeps each chart while a source holds it, within bounds per tenant and in all
(`chart_cache`). So is an OCI artifact of manifests (`artifacts`), from the same registry
code, unpacked and kept the same way.
"""

from gitopsd.source.artifacts import check_artifact_source, fetch_artifact
from gitopsd.source.chart_cache import CHART, DEPENDENCIES, ChartCache, ChartUser, Reading
from gitopsd.source.charts import check_chart_source, fetch_chart
from gitopsd.source.git_cache import GitCache
from gitopsd.source.identity import Checkout, checkout_identity, checkout_of
from gitopsd.source.listing import Entry
from gitopsd.source.policy import FLAG_ALLOWS_INSECURE, URL_USERINFO_ADVICE, check_url, mask_url
from gitopsd.source.revision import Revision, Shared, fetch, read_directory
from gitopsd.source.sharing import FetchLedger, SharedFetch
from gitopsd.source.snapshots import STALE_SNAPSHOT_SECONDS
from gitopsd.source.tree import GitTree, snapshot, tree

__all__ = [
    "CHART",
    "DEPENDENCIES",
    "FLAG_ALLOWS_INSECURE",
    "STALE_SNAPSHOT_SECONDS",
    "URL_USERINFO_ADVICE",
    "ChartCache",
    "ChartUser",
    "Checkout",
    "Entry",
    "FetchLedger",
    "GitCache",
    "GitTree",
    "Reading",
    "Revision",
    "Shared",
    "SharedFetch",
    "check_artifact_source",
    "check_chart_source",
    "check_url",
    "checkout_identity",
    "checkout_of",
    "fetch",
    "fetch_artifact",
    "fetch_chart",
    "mask_url",
    "read_directory",
    "snapshot",
    "tree",
]
