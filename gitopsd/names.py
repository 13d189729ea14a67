"""Kubernetes' rules for object names and namespaces, kind by kind.

A name ends up in a URL path, so one the API server would refuse must never be sent:
`../../kube-system/configmaps/victim` would otherwise address another namespace. Each
rule below was checked against kube-apiserver v1.34 with server-side dry-run creates;
a kind not listed gets the DNS-1123 subdomain rule, which the server requires of every
custom resource. Lenient rules (a path segment) are only the server's own minimum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gitopsd.objects import GroupKind

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"


@dataclass(frozen=True)
class NameRule:
    description: str
    pattern: re.Pattern[str]
    max_length: int | None  # None: the server bounds the request instead

    def problem(self, value: str) -> str | None:
        """Why `value` breaks the rule, or None when it follows it."""
        if self.max_length is not None and len(value) > self.max_length:
            return f"is {len(value)} characters long; must be {self.description}"
        if not self.pattern.fullmatch(value):
            return f"must be {self.description}"
        return None


DNS1123_LABEL = NameRule(
    "a DNS-1123 label: at most 63 lower-case letters, digits and '-', "
    "starting and ending with a letter or digit",
    re.compile(_LABEL),
    63,
)
DNS1035_LABEL = NameRule(
    "a DNS-1035 label: at most 63 lower-case letters, digits and '-', "
    "starting with a letter and ending with a letter or digit",
    re.compile("[a-z]([-a-z0-9]*[a-z0-9])?"),
    63,
)
DNS1123_SUBDOMAIN = NameRule(
    "a DNS-1123 subdomain: at most 253 lower-case letters, digits, '-' and '.', "
    "starting and ending with a letter or digit",
    re.compile(rf"{_LABEL}(\.{_LABEL})*"),
    253,
)
HELM_RELEASE = NameRule(
    "a Helm release name: at most 53 lower-case letters, digits, '-' and '.', "
    "starting and ending with a letter or digit",
    re.compile(rf"{_LABEL}(\.{_LABEL})*"),
    53,
)
CHART_NAME = NameRule(
    "a chart's name: letters, digits, '-', '_' and '.', starting with a letter or digit",
    re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*"),
    250,
)
LABEL_VALUE = NameRule(
    "a label value: at most 63 letters, digits, '-', '_' and '.', "
    "starting and ending with a letter or digit",
    re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"),
    63,
)
PATH_SEGMENT = NameRule(
    "usable as a URL path segment: not '.' or '..', and without '/' or '%'",
    re.compile(r"(?!\.\.?\Z)[^/%]+"),
    None,
)

_RBAC = "rbac.authorization.k8s.io"
_NAME_RULES = {
    GroupKind("", "Namespace"): DNS1123_LABEL,
    GroupKind("", "Service"): DNS1035_LABEL,
    # Names such as system:controller:x, CSRs named anything, and IPv6 addresses.
    GroupKind(_RBAC, "Role"): PATH_SEGMENT,
    GroupKind(_RBAC, "ClusterRole"): PATH_SEGMENT,
    GroupKind(_RBAC, "RoleBinding"): PATH_SEGMENT,
    GroupKind(_RBAC, "ClusterRoleBinding"): PATH_SEGMENT,
    GroupKind("certificates.k8s.io", "CertificateSigningRequest"): PATH_SEGMENT,
    GroupKind("certificates.k8s.io", "ClusterTrustBundle"): PATH_SEGMENT,  # signer:name
    GroupKind("networking.k8s.io", "IPAddress"): PATH_SEGMENT,
    GroupKind("", "Event"): PATH_SEGMENT,
}


def name_rule(group_kind: GroupKind) -> NameRule:
    """The rule the API server applies to names of this kind."""
    return _NAME_RULES.get(group_kind, DNS1123_SUBDOMAIN)


def namespace_problem(namespace: str) -> str | None:
    """Why `namespace` cannot name a namespace, or None."""
    return DNS1123_LABEL.problem(namespace)


def shown(value: str) -> str:
    """A name for an error message, quoted and cut short: it may be hostile and long."""
    quoted = repr(value)
    return quoted if len(quoted) <= 80 else quoted[:76] + "...'"
