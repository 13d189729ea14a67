"""The schema of a GitSync's spec: what to keep in sync, and how. The settings a file
source has too are the rows of gitopsd.settings_table that a GitSync's spec has, each made
into a node by its kind; the rest is written here."""

from __future__ import annotations

from dataclasses import dataclass, field

from gitopsd.drift_policy import MAX_PATTERNS, MAX_RULES, Decision
from gitopsd.gitsync.blocks_schema import NOTIFICATION, POST_BUILD, SECRET_NAME
from gitopsd.gitsync.openapi import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    Schema,
    boolean,
    duration,
    object_,
    string,
    strings,
)
from gitopsd.health.expressions import MAX_EXPRESSION_CHARS
from gitopsd.notifications.providers import MAX_PROVIDERS
from gitopsd.settings_table import REF, TABLE, Kind, Row

REPOSITORY_URL = "^(https://|http://|ssh://|file://|oci://|[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:)"
MAX_NAME = 50
"""A GitSync's name names its ApplySet parent gitopsd-<name> and labels metrics, as a file
source's name does (config.SOURCE_NAME)."""

REPOSITORY = object_(
    "The git repository to read (with helm.chart: the chart repository or OCI registry; "
    "an oci:// URL without it: an OCI artifact of manifests).",
    {
        "url": string(
            "https://, ssh:// or user@host:path; with helm.chart, a chart repository's "
            "https:// or a registry's oci://; oci://HOST/PATH alone, an OCI artifact (as "
            "flux push artifact writes one). http:// and file:// (and plain-HTTP oci://) "
            "only where the daemon's configuration allows them (gitSyncs.allowInsecure).",
            pattern=REPOSITORY_URL,
            maxLength=2048,
        ),
        "ref": string(
            REF.help,
            default=REF.default,
            minLength=1,
            maxLength=255,
            pattern="^\\S(.*\\S)?$",
        ),
        "secretRef": object_(
            "A Secret in the GitSync's namespace: `username` and `password` (https), or "
            "`identity` (an SSH private key) and `known_hosts` (ssh).",
            {"name": SECRET_NAME},
            required=["name"],
        ),
    },
    required=["url"],
    **{
        "x-kubernetes-validations": [
            {
                "rule": "!self.url.startsWith('file://') || !has(self.secretRef)",
                "message": "a file:// repository takes no secretRef",
            },
            {
                "rule": "!(self.url.startsWith('ssh://') || self.url.matches("
                "'^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:')) || has(self.secretRef)",
                "message": "an ssh repository needs a secretRef with identity and known_hosts",
            },
        ]
    },
)
RELATIVE_PATH = string(
    "A directory or file inside the repository, relative to its root.",
    minLength=1,
    maxLength=1024,
    **{
        "x-kubernetes-validations": [
            {
                "rule": "!self.startsWith('/') && !self.matches('(^|/)\\\\.\\\\.(/|$)')",
                "message": "must be relative to the repository's root, without '..'",
            }
        ]
    },
)
GLOB = string("A glob pattern.", minLength=1, maxLength=256)


@dataclass(frozen=True)
class Block:
    """A block of a file source that a GitSync's spec has: its description, and what a
    GitSync's has of its own (a Secret in place of a file source's files)."""

    description: str
    own: Schema = field(default_factory=dict)
    required: tuple[str, ...] = ()


BLOCKS = {
    "guards": Block("What every prune must pass (each refusal names its rule)."),
    "verify": Block(
        "Use only revisions whose signature verifies with these keys, as Flux's spec.verify: "
        "an unsigned commit, or one signed by another key, is never applied (Ready=False, "
        "VerificationFailed; docs/security.md, Signed commits).",
        {
            "secretRef": object_(
                "A Secret in the GitSync's namespace: OpenPGP public keys, armored, under "
                "any key, and SSH allowed signers under `allowed_signers`.",
                {"name": SECRET_NAME},
                required=["name"],
            )
        },
        required=("secretRef",),
    ),
}
"""Each block of a file source that a GitSync's spec has."""


def _node(row: Row) -> Schema:
    """The row as a node of the schema, by its kind; the API server fills its default in."""
    if row.kind is Kind.SWITCH:
        return boolean(row.help, row.default)
    if row.kind is Kind.DURATION:
        return duration(row.help, row.default)
    if row.kind in (Kind.PATHS, Kind.GLOBS):
        return strings(row.help, row.default, RELATIVE_PATH if row.kind is Kind.PATHS else GLOB)
    if row.kind is Kind.CHOICE:
        words = [str(word) for word in type(row.default)]
        return string(row.help, enum=words, default=str(row.default))
    if row.kind is Kind.PERCENT:
        bounds = {"minimum": 0, "exclusiveMinimum": True, "maximum": 100}
        return {"type": "number", "description": row.help, "default": row.default, **bounds}
    raise ValueError(f"{row.key}: a GitSync's spec has no {row.kind.value} setting")


def settings_properties() -> Schema:
    """The nodes of the settings a GitSync's spec has, in the table's order; a block's
    (guards) where its first row is. A block that requires nothing defaults to {} so that
    the API server fills its fields' defaults in too; one that does (verify) is absent
    unless given."""
    properties: Schema = {}
    for row in (row for row in TABLE if row.gitsync):
        inside = properties
        if row.block:
            inside = properties.setdefault(row.block, _block(BLOCKS[row.block]))["properties"]
        inside[row.name] = _node(row)
    return properties


def _block(block: Block) -> Schema:
    if block.required:
        return object_(block.description, dict(block.own), required=list(block.required))
    return object_(block.description, dict(block.own), default={})


HELM = object_(
    "How `helm template` renders each chart (a directory holding Chart.yaml) under paths, "
    "or the chart of a chart repository the GitSync syncs.",
    {
        "releaseName": string(
            "`.Release.Name` (default: the chart directory's name).",
            pattern=DNS_SUBDOMAIN,
            maxLength=53,
        ),
        "releaseNamespace": string(
            "`.Release.Namespace` (default: targetNamespace).", pattern=DNS_LABEL, maxLength=63
        ),
        "valuesFiles": strings(
            "Values files, relative to the chart's directory, inside the repository; later "
            "ones win.",
            (),
            RELATIVE_PATH,
        ),
        "values": {
            "type": "object",
            "description": "Values applied after the values files.",
            "x-kubernetes-preserve-unknown-fields": True,
        },
        "chart": string(
            "A chart of the chart repository (https://) or OCI registry (oci://HOST/PATH) "
            "at `repository`: the GitSync syncs it instead of a git revision, with "
            "credentials from secretRef as for git.",
            pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
            maxLength=250,
        ),
        "version": string(
            "The range of the chart's versions to pick the highest of, as helm's --version "
            "reads it ('^1.2', '~1.2.3', '1.x'; default '*': the latest release).",
            maxLength=256,
        ),
    },
)
DRIFT_RULE = object_(
    "A drift rule: what becomes of a drifted field of the objects it targets (the first "
    "rule that matches decides; each object's gitopsd.io/drift-policy annotation comes "
    "first; a field no rule matches is healed).",
    {
        "name": string("Shown in diff, status and metrics.", pattern=DNS_LABEL, maxLength=63),
        "action": string(
            "ignore: no drift; accept: reported as accepted, never healed; heal; alert: "
            "drift, never healed.",
            enum=[str(decision) for decision in Decision],
        ),
        "target": object_(
            "The objects it applies to (default: all).",
            {
                "group": string("API group ('' for the core group).", maxLength=253),
                "kind": string("Kind.", minLength=1, maxLength=253),
                "namespace": string("Glob of the namespace.", minLength=1, maxLength=253),
                "name": string("Glob of the name.", minLength=1, maxLength=253),
            },
        ),
        "paths": strings(
            "Fields, each with what is inside it: spec.replicas, "
            "spec.template.spec.containers[name=app].image, [*] any element, or a JSON "
            "pointer /spec/replicas (default: every field).",
            (),
            string("A field path.", minLength=1, maxLength=1024),
        )
        | {"maxItems": MAX_PATTERNS},
        "managers": strings(
            "Globs of the field manager owning the field now (default: any).",
            (),
            string("A field manager glob.", minLength=1, maxLength=1024),
        )
        | {"maxItems": MAX_PATTERNS},
    },
    required=["action"],
)
HEALTH_CHECK = object_(
    "A health rule of this GitSync's own, as Flux's healthCheckExprs: CEL expressions over "
    "an object of one group and kind (its fields as variables: status.phase == 'Ready'), "
    "tried in order inProgress, failed, current; the first that holds decides, none: "
    "InProgress. It replaces the built-in rule of the kind.",
    {
        "apiVersion": string(
            "apiVersion of the kind (its group counts).", minLength=1, maxLength=253
        ),
        "kind": string("Kind.", minLength=1, maxLength=253),
        "current": string(
            "Holds when the object is Current.", minLength=1, maxLength=MAX_EXPRESSION_CHARS
        ),
        "inProgress": string(
            "Holds while it is InProgress.", minLength=1, maxLength=MAX_EXPRESSION_CHARS
        ),
        "failed": string("Holds when it Failed.", minLength=1, maxLength=MAX_EXPRESSION_CHARS),
    },
    required=["apiVersion", "kind", "current"],
)
DEPENDENCY = object_(
    "Another GitSync.",
    {
        "name": string("Its name.", pattern=DNS_LABEL, maxLength=MAX_NAME),
        "namespace": string(
            "Its namespace (default: this GitSync's).", pattern=DNS_LABEL, maxLength=63
        ),
    },
    required=["name"],
)
SPEC = object_(
    "What to keep in sync, and how.",
    {
        "repository": REPOSITORY,
        **settings_properties(),
        "helm": HELM,
        "drift": {
            "type": "array",
            "description": "The drift policy: rules deciding, field by field, what drift "
            "is healed, accepted, ignored or alerted on (docs/sync.md, Drift policy).",
            "maxItems": MAX_RULES,
            "items": DRIFT_RULE,
        },
        "healthCheckExprs": {
            "type": "array",
            "description": "Health rules of this GitSync's own, one per kind (docs/sync.md, "
            "Health rules).",
            "maxItems": 100,
            "items": HEALTH_CHECK,
        },
        "suspend": boolean("Stop reconciling until set back to false.", False),
        "webhook": object_(
            "A receiver for push events: POST /hooks/gitsyncs/NAMESPACE/NAME on the daemon's "
            "listener, signed with the key `token` of this Secret (GitHub's "
            "X-Hub-Signature-256, GitLab's X-Gitlab-Token, or X-Signature: sha256=HMAC); a "
            "signed call polls now, fetching from the remote.",
            {
                "secretRef": object_(
                    "A Secret in the GitSync's namespace, holding `token`.",
                    {"name": SECRET_NAME},
                    required=["name"],
                )
            },
            required=["secretRef"],
        ),
        "decryption": object_(
            "Decrypt the SOPS-encrypted files of each revision, as Flux's spec.decryption: "
            "manifests, the files of a kustomization's secretGenerator and charts' values "
            "files (docs/security.md, Encrypted files). A file that does not decrypt refuses "
            "the revision.",
            {
                "provider": string("The decryption provider.", enum=["sops"], default="sops"),
                "secretRef": object_(
                    "A Secret in the GitSync's namespace: age identities under keys ending "
                    "in `.agekey`, armored OpenPGP private keys under keys ending in `.asc`.",
                    {"name": SECRET_NAME},
                    required=["name"],
                ),
            },
            required=["secretRef"],
        ),
        "postBuild": POST_BUILD,
        "notifications": {
            "type": "array",
            "description": "Where to tell of its syncs, drift and health (docs/notifications.md): "
            "a webhook (CloudEvents, signed), Slack or its kin, Alertmanager, or the commit "
            "statuses of GitHub, GitLab or Gitea.",
            "maxItems": MAX_PROVIDERS,
            "items": NOTIFICATION,
        },
        "targetNamespace": string(
            "Namespace of namespaced objects whose manifest names none (default: the "
            "GitSync's namespace).",
            pattern=DNS_LABEL,
            maxLength=63,
        ),
        "cluster": string(
            "A cluster the daemon's configuration declares (`clusters:`) and allows this "
            "namespace to target: the objects are applied there, acting as "
            "serviceAccountName there (docs/clusters.md). Default: the daemon's own cluster.",
            pattern=DNS_LABEL,
            maxLength=63,
        ),
        "kubeConfig": object_(
            "The cluster to apply to, through a kubeconfig in a Secret of this namespace, as "
            "Flux's; allowed only in the namespaces gitSyncs.kubeConfigNamespaces lists. Its "
            "credentials are inline: a kubeconfig that runs a program or reads a file is "
            "refused.",
            {
                "secretRef": object_(
                    "The Secret, and its key holding the kubeconfig (default `value`).",
                    {"name": SECRET_NAME, "key": string("Its key.", maxLength=253)},
                    required=["name"],
                ),
            },
            required=["secretRef"],
        ),
        "serviceAccountName": string(
            "Every read and write of this GitSync impersonates this ServiceAccount of its "
            "namespace; without it, the daemon's default applies (docs/operator.md).",
            pattern=DNS_SUBDOMAIN,
            maxLength=253,
        ),
        "dependsOn": {
            "type": "array",
            "description": "GitSyncs that must have applied their current revision, with "
            "every object healthy, before this one applies a new revision. A cycle stalls "
            "the GitSyncs on it.",
            "maxItems": 32,
            "items": DEPENDENCY,
        },
    },
    required=["repository"],
    **{
        "x-kubernetes-validations": [
            {
                "rule": "self.mode == 'enforce' || !self.prune",
                "message": "prune needs mode enforce: observe and warn never write",
            },
            {
                "rule": "self.prune || !self.guards.allowMassPrune",
                "message": "guards.allowMassPrune needs prune",
            },
        ]
    },
)
