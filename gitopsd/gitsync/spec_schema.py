"""The schema of a GitSync's spec: what to keep in sync, and how."""

from __future__ import annotations

from gitopsd.config import PrunePolicy, SourceSpec, SyncSettings
from gitopsd.configfile import Mode, SourceConfig
from gitopsd.drift_policy import MAX_PATTERNS, MAX_RULES, Decision
from gitopsd.gitsync.openapi import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    boolean,
    duration,
    object_,
    string,
    strings,
)
from gitopsd.health.expressions import MAX_EXPRESSION_CHARS

REPOSITORY_URL = "^(https://|http://|ssh://|file://|oci://|[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:)"
MAX_NAME = 50
"""A GitSync's name names its ApplySet parent gitopsd-<name> and labels metrics, as a file
source's name does (config.SOURCE_NAME)."""

REPOSITORY = object_(
    "The git repository to read (with helm.chart: the chart repository or OCI registry).",
    {
        "url": string(
            "https://, ssh:// or user@host:path; with helm.chart, a chart repository's "
            "https:// or a registry's oci://. http:// and file:// (and plain-HTTP oci://) "
            "only where the daemon's configuration allows them (gitSyncs.allowInsecure).",
            pattern=REPOSITORY_URL,
            maxLength=2048,
        ),
        "ref": string(
            "Branch, tag or commit sha; HEAD is the remote's default branch.",
            default=SourceSpec.ref,
            minLength=1,
            maxLength=255,
            pattern="^[^\\s]+$",
        ),
        "secretRef": object_(
            "A Secret in the GitSync's namespace: `username` and `password` (https), or "
            "`identity` (an SSH private key) and `known_hosts` (ssh).",
            {"name": string("The Secret's name.", pattern=DNS_SUBDOMAIN, maxLength=253)},
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
GUARDS = object_(
    "What every prune must pass (each refusal names its rule).",
    {
        "allowEmpty": boolean(
            "Prune even when the revision holds no object at all (usually a broken source).",
            PrunePolicy.allow_empty,
        ),
        "pruneBudgetPercent": {
            "type": "number",
            "description": "Most objects one sync may prune, as a share of the owned objects "
            "(one is always allowed).",
            "default": PrunePolicy.budget_percent,
            "minimum": 0,
            "exclusiveMinimum": True,
            "maximum": 100,
        },
        "allowMassPrune": boolean("Prune past the budget.", PrunePolicy.allow_mass_prune),
        "pruneProtected": boolean(
            "Also prune Namespaces, CRDs, PersistentVolumes and PersistentVolumeClaims.",
            PrunePolicy.prune_protected,
        ),
    },
    default={},
)
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
        "paths": strings(
            "Directories or files inside the repository, read recursively.",
            SourceSpec.paths,
            RELATIVE_PATH,
        ),
        "include": strings(
            "Glob patterns a file name must match to be read.", SourceSpec.include, GLOB
        ),
        "exclude": strings(
            "Glob patterns (against the path from the root) that skip a file.",
            SourceSpec.exclude,
            GLOB,
        ),
        "interval": duration("How often git is polled.", SourceConfig.interval_seconds),
        "timeout": duration(
            "Deadline of one reconcile: past it nothing more is written.",
            SourceConfig.timeout_seconds,
        ),
        "mode": string(
            "observe: measure drift only; warn: also an Event on each drifted object; "
            "enforce: apply each new revision (and prune, if enabled).",
            enum=[str(mode) for mode in Mode],
            default=str(SourceConfig.mode),
        ),
        "prune": boolean("Delete what this GitSync applied once it left git.", False),
        "selfHeal": boolean(
            "In enforce mode, correct drift as soon as a watch reports it.",
            SourceConfig.self_heal,
        ),
        "guards": GUARDS,
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
        "replaceOnImmutable": boolean(
            "Delete and create again an object whose fields that cannot change once set git "
            "changes (a Job's template), if this GitSync provably owns it; without it, such "
            "an object is refused alone and the rest applied (per object: the annotation "
            "gitopsd.io/sync-options: replace-on-immutable).",
            SyncSettings.replace_on_immutable,
        ),
        "adopt": boolean(
            "Take over existing objects of its revision that no source, or another gitopsd "
            "source, owns (such as those a `gitopsd sync` of the same repository recorded).",
            SyncSettings.adopt,
        ),
        "createNamespace": boolean(
            "Create the namespace it applies into (targetNamespace) when it does not exist, "
            "as Argo CD's CreateNamespace=true; it is never pruned.",
            SyncSettings.create_namespace,
        ),
        "suspend": boolean("Stop reconciling until set back to false.", False),
        "webhook": object_(
            "A receiver for push events: POST /hooks/gitsyncs/NAMESPACE/NAME on the daemon's "
            "listener, signed with the key `token` of this Secret (GitHub's "
            "X-Hub-Signature-256, GitLab's X-Gitlab-Token, or X-Signature: sha256=HMAC); a "
            "signed call polls now, fetching from the remote.",
            {
                "secretRef": object_(
                    "A Secret in the GitSync's namespace, holding `token`.",
                    {"name": string("The Secret's name.", pattern=DNS_SUBDOMAIN, maxLength=253)},
                    required=["name"],
                )
            },
            required=["secretRef"],
        ),
        "targetNamespace": string(
            "Namespace of namespaced objects whose manifest names none (default: the "
            "GitSync's namespace).",
            pattern=DNS_LABEL,
            maxLength=63,
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
