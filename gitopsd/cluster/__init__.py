"""The only package that talks to the API server.

`Cluster` reads, applies and deletes objects as plain dicts; API failures become
`gitopsd.errors.ClusterError` with a closed `reason`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from gitopsd.cluster import definitions
from gitopsd.cluster.api import Api, ApiError, Counters, Unserved
from gitopsd.cluster.connect import (
    POOL_CONNECTIONS,
    Connection,
    api_client,
    context_namespace,
    kubeconfig_file,
)
from gitopsd.cluster.discovery import Discovery
from gitopsd.cluster.fanout import run_concurrently
from gitopsd.cluster.openapi import documents
from gitopsd.cluster.pacing import Pace
from gitopsd.cluster.projection import Projection
from gitopsd.cluster.transport import Impersonating, PooledTransport
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.objects import FIELD_MANAGER, Body, GroupKind, ObjectKey, Resource, key_of
from gitopsd.resources import ACCESS_REVIEWS, EVENTS

PATCH_ATTEMPTS = 3
"""Reads and patches of one object in a row, when another writer keeps changing it."""

__all__ = [
    "ApiError",
    "Cluster",
    "Counters",
    "Resource",
    "Unserved",
    "context_namespace",
    "kubeconfig_file",
    "run_concurrently",
]

APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML, so the body is sent as JSON
JSON_PATCH = "application/json-patch+json"
PATCH_NOT_APPLICABLE = "the server rejected our request due to an error in our request"
"""The API server's whole answer (422, no causes) when a JSON patch's operations do not apply
to the object: its `test` of the resourceVersion failed, or a path is no longer there."""
VERSION = "/metadata/resourceVersion"
LIST_RESTARTS = 3
"""How often a list whose snapshot expired while it was read starts over before failing."""
Keep = Callable[[ObjectKey, Body], bool]


@dataclass
class Listing:
    """What a list read: the objects kept, the key of every object read, and the list's
    resourceVersion."""

    items: list[Body] = field(default_factory=list)
    keys: set[ObjectKey] = field(default_factory=set)
    version: str = ""


@dataclass
class Cluster:
    api: Api
    discovery: Discovery
    may_write: Callable[[], bool] = lambda: True
    """Fencing, checked before every attempt of every write (retries included): a daemon
    that lost its lease, or whose source is another replica's now, writes nothing."""
    stopping: Callable[[], bool] = lambda: False
    """A signal asked the process to stop: no write is sent but the record of what was
    done (`recording`), so nothing it applied is left out of its ApplySet's record."""
    page_size: int = 500
    """Objects per LIST request: a list of 10,000 objects never arrives as one answer."""
    projection: Projection = field(default_factory=Projection)
    """Projects what lists for reading and the watch cache keep, sharing what objects have
    in common."""
    namespace: str | None = None
    """The namespace the kubeconfig's context names: the CLI's default, as kubectl's."""
    name: str = ""
    """Which cluster it is ("": the daemon's own, or the command's): watches are shared
    only by sources of one cluster."""

    def keep_whole_status(self, kinds: Iterable[GroupKind]) -> None:
        """Objects of `kinds` are read (and cached) with their whole status from now on: a
        source's own health rules may read any field of it."""
        wanted = {(kind.group, kind.kind) for kind in kinds}
        if not wanted <= self.projection.whole_status:
            self.projection.whole_status |= wanted

    @classmethod
    def connect(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        allow_exec: bool = False,
        connections: int = POOL_CONNECTIONS,
        insecure: bool = False,
        may_write: Callable[[], bool] = lambda: True,
        stopping: Callable[[], bool] = lambda: False,
    ) -> Cluster:
        """A cluster client that keeps `connections` open: at least the requests in flight;
        `insecure`: the server's certificate is not checked (see `api_client`); its writes
        fenced by `may_write` and `stopping` (see `writable`)."""
        connection = api_client(kubeconfig, context, allow_exec, connections, insecure)
        return cls.over(connection, may_write=may_write, stopping=stopping)

    @classmethod
    def over(
        cls,
        connection: Connection,
        name: str = "",
        may_write: Callable[[], bool] = lambda: True,
        stopping: Callable[[], bool] = lambda: False,
    ) -> Cluster:
        """A cluster client over `connection`, called `name`, fenced as `connect`'s is."""
        transport = PooledTransport.of(connection.client, connection.credentials)
        api = Api(transport, server=connection.server)
        return cls(
            api, Discovery(api), may_write, stopping, namespace=connection.namespace, name=name
        )

    def openapi(self, api_versions: Iterable[str]) -> dict[str, Body]:
        """The cluster's OpenAPI v3 document of each of `api_versions` it publishes."""
        return documents(self.api, api_versions)

    def get(
        self, resource: Resource, namespace: str, name: str, projected: bool = False
    ) -> Body | None:
        """The live object, or None when it does not exist; `projected`: without what drift
        ignores (see `projection`)."""
        try:
            found: Body = self.api.request("GET", resource.path(namespace, name))
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return self.projection.of(found) if projected else found

    def list_objects(
        self, resource: Resource, namespace: str = "", selector: str = "", projected: bool = False
    ) -> list[Body]:
        """Every object of a resource (in one namespace, or all), page by page; `projected`:
        without what drift ignores (see `projection`)."""
        return self.list_with_version(resource, namespace, selector, projected).items

    def list_with_version(
        self,
        resource: Resource,
        namespace: str = "",
        selector: str = "",
        projected: bool = False,
        keep: Keep | None = None,
    ) -> Listing:
        """What a list reads, from which a watch can continue; of its objects, only those
        `keep` keeps are projected and held (a watch cache's list of all namespaces reads
        every object of its kind, most of them others'). A list read slower than the server
        keeps its snapshot (410 Gone on a continue token) starts over: pages of two snapshots
        never mix."""
        listing, continue_token, restarts = Listing(), "", 0
        while True:
            try:
                page = self._page(resource, namespace, selector, continue_token)
            except ApiError as error:
                if error.status != 410 or not continue_token or restarts == LIST_RESTARTS:
                    raise
                listing, continue_token, restarts = Listing(), "", restarts + 1
                continue
            for item in page.get("items") or []:  # list items lack apiVersion and kind
                body = {"apiVersion": resource.api_version, "kind": resource.kind, **item}
                key = key_of(body)
                listing.keys.add(key)
                if keep is None or keep(key, body):
                    listing.items.append(self.projection.of(body) if projected else body)
            metadata = page.get("metadata") or {}
            continue_token = metadata.get("continue") or ""
            if not continue_token:
                listing.version = str(metadata.get("resourceVersion", ""))
                return listing

    def _page(self, resource: Resource, namespace: str, selector: str, continue_token: str) -> Body:
        query = [("limit", str(self.page_size)), ("labelSelector", selector)]
        query += [("continue", continue_token)] if continue_token else []
        page: Body = self.api.request("GET", resource.path(namespace), query)
        return page

    def apply(
        self, resource: Resource, body: Body, *, dry_run: bool, force: bool, projected: bool = False
    ) -> Body:
        """Server-side apply as field manager `gitopsd`, with strict field validation; the
        object as stored (or as it would be), `projected` for comparing with live objects."""
        metadata = body["metadata"]
        query = [
            ("fieldManager", FIELD_MANAGER),
            ("fieldValidation", "Strict"),
            ("force", "true" if force else "false"),
        ]
        query += [("dryRun", "All")] if dry_run else []
        fence = None if dry_run else self._fence
        path = resource.path(metadata.get("namespace", ""), metadata["name"])
        applied: Body = self.api.request(
            "PATCH", path, query, body, content_type=APPLY_PATCH, fence=fence
        )
        return self.projection.of(applied) if projected else applied

    def create(self, resource: Resource, body: Body) -> Body:
        """Creates the object as field manager `gitopsd` (named by the server when it gives
        only metadata.generateName); the object as stored."""
        query = [("fieldManager", FIELD_MANAGER), ("fieldValidation", "Strict")]
        path = resource.path(body["metadata"].get("namespace", ""))
        created: Body = self.api.request("POST", path, query, body, fence=self._fence)
        return created

    def patch(self, resource: Resource, namespace: str, name: str, operations: list[Any]) -> Body:
        """A JSON patch (RFC 6902) made from the object as read, with a `test` of its
        resourceVersion: operations that no longer apply mean the object changed since it
        was read, a conflict (409) to read again for, not an invalid request."""
        path = resource.path(namespace, name)
        try:
            patched: Body = self.api.request(
                "PATCH", path, (), operations, content_type=JSON_PATCH, fence=self._fence
            )
        except ApiError as error:
            versioned = any(
                op.get("op") == "test" and op.get("path") == VERSION for op in operations
            )
            if not versioned or (error.status, str(error)) != (422, PATCH_NOT_APPLICABLE):
                raise
            raise ApiError(409, f"PATCH {path}: changed since it was read ({error})") from None
        return patched

    def patch_as_read(
        self, resource: Resource, read: Callable[[], Body], patch_of: Callable[[Body], list[Any]]
    ) -> Body:
        """`patch` of the object `read()` returns, made by `patch_of` from it; read again and
        made anew when it changed in between (another writer, as a controller writing its
        status), at most PATCH_ATTEMPTS times."""
        attempts = PATCH_ATTEMPTS
        while True:
            body = read()
            metadata = body["metadata"]
            try:
                name = metadata["name"]
                return self.patch(resource, metadata.get("namespace", ""), name, patch_of(body))
            except ClusterError as error:
                attempts -= 1
                if error.reason != ClusterReason.CONFLICT or attempts == 0:
                    raise

    def delete(
        self, resource: Resource, namespace: str, name: str, uid: str, version: str = ""
    ) -> bool:
        """Deletes exactly the object seen (its uid, and its resourceVersion if given); False
        if already gone."""
        preconditions = {"uid": uid, **({"resourceVersion": version} if version else {})}
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": preconditions,
        }
        try:
            self.api.request(
                "DELETE", resource.path(namespace, name), (), options, fence=self._fence
            )
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    def watch(self, resource: Resource, namespace: str, version: str) -> Iterator[Body]:
        """Opens a watch from `version`, with bookmarks (raising if it cannot); its events
        end when the server closes it."""
        query = [
            ("watch", "true"),
            ("resourceVersion", version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "300"),
        ]
        return self.api.stream(resource.path(namespace), query)

    def event(self, about: Body, reason: str, message: str, kind: str = "Warning") -> None:
        """Records an Event (Warning or Normal) on an object (kubectl describe shows it)."""
        metadata = about.get("metadata") or {}
        namespace = metadata.get("namespace") or "default"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{metadata.get('name', 'object')}.",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": about.get("apiVersion"),
                "kind": about.get("kind"),
                "namespace": metadata.get("namespace"),
                "name": metadata.get("name"),
                "uid": metadata.get("uid"),
                "resourceVersion": metadata.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.api.request("POST", EVENTS.path(namespace), (), event, fence=self._fence)

    def apply_status(self, resource: Resource, namespace: str, name: str, status: Body) -> Body:
        """Server-side apply of an object's status through its status subresource: the
        fields left out of `status` that gitopsd set before are removed."""
        body = {
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": {"name": name, "namespace": namespace},
            "status": status,
        }
        query = [("fieldManager", FIELD_MANAGER), ("force", "true")]
        path = resource.path(namespace, name) + "/status"
        applied: Body = self.api.request(
            "PATCH", path, query, body, content_type=APPLY_PATCH, fence=self._fence
        )
        return applied

    def impersonating(self, user: str) -> Cluster:
        """A client whose every request acts as `user` (the API server checks that this
        process may impersonate it, then authorizes each request as `user`). It shares the
        connections, request tally, discovery and fencing."""
        transport = Impersonating(self.api.transport, user)
        return replace(self, api=replace(self.api, transport=transport))

    def paced(self, pace: Pace | None) -> Cluster:
        """A client whose requests (not its watches) wait for their turn at `pace`, a
        tenant's share of the API server, shared by its GitSyncs (None: no wait)."""
        return replace(self, api=replace(self.api, pace=pace))

    @property
    def identity(self) -> str:
        """Whom its requests act as: the impersonated user, or "" for this process itself."""
        transport = self.api.transport
        return transport.user if isinstance(transport, Impersonating) else ""

    def may_watch_everywhere(self, resource: Resource) -> bool:
        """Whether its identity may list and watch `resource` in all namespaces (asked with
        SelfSubjectAccessReviews, which change nothing); False when it cannot be asked."""
        try:
            return all(self.allowed(verb, resource) for verb in ("list", "watch"))
        except ClusterError:
            return False

    def allowed(self, verb: str, resource: Resource, namespace: str = "") -> bool:
        """Whether its identity may `verb` `resource` in `namespace` ("": in every one, or a
        cluster-scoped resource), as the server's authorizer answers a
        SelfSubjectAccessReview, which any identity may send and which changes nothing."""
        attributes = {"verb": verb, "group": resource.group, "resource": resource.plural}
        if namespace:
            attributes["namespace"] = namespace
        review = {
            "apiVersion": ACCESS_REVIEWS.api_version,
            "kind": ACCESS_REVIEWS.kind,
            "spec": {"resourceAttributes": attributes},
        }
        answer: Body = self.api.request("POST", ACCESS_REVIEWS.path(""), body=review)
        return bool((answer.get("status") or {}).get("allowed"))

    def writable(self) -> bool:
        """Whether a write would be sent now: held, and not stopping."""
        return self.may_write() and not self.stopping()

    def fenced_as(self, other: Cluster) -> Cluster:
        """This cluster, its writes fenced as `other`'s are (the daemon's lease, a share)."""
        return replace(self, may_write=other.may_write, stopping=other.stopping)

    def recording(self) -> Cluster:
        """This cluster for the one write a stopping process still makes: its record."""
        return replace(self, stopping=lambda: False)

    def _fence(self) -> None:
        if not self.writable():
            raise ClusterError(
                "write refused: this process is shutting down or does not hold the leader lease",
                ClusterReason.FENCED,
            )

    def wait_established(self, crd_names: list[str], timeout_seconds: float) -> None:
        """Waits until every named CRD is Established and its kind served (`definitions`)."""
        definitions.wait_served(self, crd_names, timeout_seconds)
