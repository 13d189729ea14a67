"""`gitopsd validate`'s schema checks, offline: each case a revision's manifests and every
problem the built-in schemas (Kubernetes v1.34.4's) and the revision's CRDs find in them.
What the API server accepts and refuses here was asked of a v1.34.4 kube-apiserver with
fieldValidation=Strict (tests/integration/test_validate.py asks it again for some)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gitopsd import validation
from gitopsd.config import Limits
from gitopsd.manifests import Directory, Positions, load, parse_documents
from gitopsd.manifests.identity import manifests_of
from gitopsd.objects import Manifest, Resource

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: nginx
"""

WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer, minimum: 1}
                color: {type: string, enum: [red, blue]}
                port: {x-kubernetes-int-or-string: true}
                extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
                sealed: {type: object}
                template: {type: object, x-kubernetes-embedded-resource: true,
                           x-kubernetes-preserve-unknown-fields: true}
    - name: v0
      served: false
      storage: false
      schema: {openAPIV3Schema: {type: object}}
"""


def widget(spec: str) -> str:
    return f"apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: w}}\nspec: {spec}\n"


def with_spec(fields: str) -> str:
    """The Deployment with `fields` (YAML lines at the spec's indentation) added."""
    return DEPLOYMENT.replace("spec:\n", "spec:\n" + textwrap.indent(fields, "  "), 1)


def with_container(fields: str) -> str:
    """The Deployment with `fields` added to its container."""
    return DEPLOYMENT + textwrap.indent(fields, "          ")


def read(text: str) -> list[Manifest]:
    return manifests_of("m.yaml", parse_documents(text, "m.yaml", Limits()))


def problems(text: str, catalogue: validation.Catalogue | None = None) -> list[str]:
    """Each problem as `line: object: path: message`."""
    found = validation.check(read(text), catalogue or validation.built_in())
    return [str(problem).removeprefix("m.yaml:") for problem in found]


VALID = [
    pytest.param(DEPLOYMENT, id="a Deployment"),
    pytest.param(with_spec("replicas: 2.0\n"), id="a whole float is an integer"),
    pytest.param(with_spec("replicas: null\n"), id="null is a field left out"),
    pytest.param(with_container("args: [null]\n"), id="null in a list"),
    pytest.param(
        with_spec("strategy: {rollingUpdate: {maxSurge: 25%, maxUnavailable: 1}}\n"),
        id="int-or-string: a string and an int",
    ),
    pytest.param(
        with_container("resources: {limits: {cpu: 0.5, memory: 512}}\n"),
        id="Quantity: numbers",
    ),
    pytest.param(
        with_container(
            "resources: {limits: {cpu: 500m, memory: 1.5Gi, storage: 1e3, a: 100n, b: 5u}}\n"
        ),
        id="Quantity: strings",
    ),
    pytest.param(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels: {a: null}\n"
        "  creationTimestamp: null\n",
        id="null map values and timestamps, as kustomize writes them",
    ),
    pytest.param(
        WIDGET_CRD + "---\n" + widget("{size: 2, color: red, port: http, extra: {any: [1]}}"),
        id="a custom resource of a CRD of the revision",
    ),
    pytest.param(
        WIDGET_CRD
        + "---\n"
        + widget(
            "{port: 8080, template: {apiVersion: v1, kind: Pod, "
            "metadata: {name: p}, spec: {anything: 1}}}"
        ),
        id="preserve-unknown-fields and an embedded resource",
    ),
]


@pytest.mark.parametrize("text", VALID)
def test_what_the_api_server_accepts_is_valid(text: str) -> None:
    assert problems(text) == []


INVALID = [
    pytest.param(
        with_spec("replica: 2\n"),
        ["1: apps/Deployment/shop/web: .spec.replica: field not declared in schema"],
        id="the typo replica",
    ),
    pytest.param(
        with_spec("replicas: '2'\n"),
        ["1: apps/Deployment/shop/web: .spec.replicas: must be integer, not string"],
        id="a wrong type",
    ),
    pytest.param(
        with_spec("replicas: 2.5\n"),
        ["1: apps/Deployment/shop/web: .spec.replicas: must be integer, not number"],
        id="a fraction is no integer",
    ),
    pytest.param(
        with_spec("strategy: {rollingUpdate: {maxSurge: 1.5, maxUnavailable: true}}\n"),
        [
            "1: apps/Deployment/shop/web: .spec.strategy.rollingUpdate.maxSurge: "
            "must be integer or string, not number",
            "1: apps/Deployment/shop/web: .spec.strategy.rollingUpdate.maxUnavailable: "
            "must be integer or string, not boolean",
        ],
        id="int-or-string: neither",
    ),
    pytest.param(
        with_container("resources: {limits: {memory: 512 MB, cpu: true}}\n"),
        [
            "1: apps/Deployment/shop/web: .spec.template.spec.containers[0].resources.limits"
            ".cpu: must be string or number, not boolean",
            "1: apps/Deployment/shop/web: .spec.template.spec.containers[0].resources.limits"
            ".memory: must be a quantity: a number with an optional suffix, as 500m, 1.5 or 2Gi",
        ],
        id="Quantity: neither a number nor a quantity",
    ),
    pytest.param(
        with_spec("selector: null\n").replace("  selector: {matchLabels: {app: web}}\n", ""),
        ["1: apps/Deployment/shop/web: .spec.selector: required, but not set"],
        id="null is no required field",
    ),
    pytest.param(
        with_spec("replica: 2\nreplicas: two\npaused: 'no'\n")
        + "          imagePullPolcy: Always\n        - image: sidecar\n",
        [
            "1: apps/Deployment/shop/web: .spec.paused: must be boolean, not string",
            "1: apps/Deployment/shop/web: .spec.replica: field not declared in schema",
            "1: apps/Deployment/shop/web: .spec.replicas: must be integer, not string",
            "1: apps/Deployment/shop/web: .spec.template.spec.containers[0].imagePullPolcy: "
            "field not declared in schema",
            "1: apps/Deployment/shop/web: .spec.template.spec.containers[1].name: "
            "required, but not set",
        ],
        id="several errors, all reported",
    ),
    pytest.param(
        with_container("env: [{name: A, value: '1'}, {name: B}, {name: A, value: s3cret}]\n")
        + "        - {name: web, image: sidecar}\n",
        [
            "1: apps/Deployment/shop/web: .spec.template.spec.containers[0].env[2]: "
            "has the same name as [0]",
            "1: apps/Deployment/shop/web: .spec.template.spec.containers[1]: "
            "has the same name as [0]",
        ],
        id="two entries of a list-type map with the same keys",
    ),
    pytest.param(
        DEPLOYMENT.replace("namespace: shop}", "namespace: shop, finalizers: [a/b, a/b]}"),
        ["1: apps/Deployment/shop/web: .metadata.finalizers[1]: is the same as [0]"],
        id="an item twice in a list-type set",
    ),
    pytest.param(
        DEPLOYMENT + "status: {replica: 1}\n",
        ["1: apps/Deployment/shop/web: .status.replica: field not declared in schema"],
        id="status is checked too",
    ),
    pytest.param(
        DEPLOYMENT.replace("kind: Deployment", "kind: Deploymnet"),
        [
            "1: apps/Deploymnet/shop/web: .kind: apps/v1 has no kind Deploymnet in "
            "Kubernetes v1.34.4 or the revision's CRDs: did you mean Deployment?"
        ],
        id="a kind typo",
    ),
    pytest.param(
        DEPLOYMENT.replace("apps/v1", "apps/v1beta2"),
        [
            "1: apps/Deployment/shop/web: .apiVersion: apps/v1beta2 has no kind Deployment in "
            "Kubernetes v1.34.4 or the revision's CRDs; Deployment is served as apps/v1"
        ],
        id="an apiVersion no longer served",
    ),
    pytest.param(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, namespace: default}\n",
        [
            "1: Namespace/default/shop: .metadata.namespace: Namespace is cluster-scoped, but "
            "names namespace default"
        ],
        id="a cluster-scoped kind in a namespace",
    ),
    pytest.param(
        widget("{size: 2}"),
        [
            "1: example.com/Widget/w: .kind: example.com/v1 has no kind Widget in "
            "Kubernetes v1.34.4 or the revision's CRDs, so there is no schema to check it "
            "against (`gitopsd validate --cluster` checks against the CRDs a cluster has)"
        ],
        id="a custom resource without its CRD",
    ),
    pytest.param(
        WIDGET_CRD + "---\n" + widget("{size: 0, color: green, siz: 2, sealed: {a: 1}}"),
        [
            '31: example.com/Widget/w: .spec.color: must be one of "red", "blue"',
            "31: example.com/Widget/w: .spec.sealed.a: field not declared in schema",
            "31: example.com/Widget/w: .spec.siz: field not declared in schema",
            "31: example.com/Widget/w: .spec.size: must be at least 1",
        ],
        id="a CRD of the revision and a custom resource with a typo",
    ),
    pytest.param(
        WIDGET_CRD
        + "---\n"
        + widget("{port: 1.5, template: {metadata: {nam: x}}}").replace(
            "metadata: {name: w}", "metadata: {name: w, lables: {a: b}}"
        ),
        [
            "31: example.com/Widget/w: .metadata.lables: field not declared in schema",
            "31: example.com/Widget/w: .spec.port: must be integer or string, not number",
            "31: example.com/Widget/w: .spec.template.metadata.nam: field not declared in schema",
        ],
        id="a custom resource's metadata, and its embedded resource's, are ObjectMeta",
    ),
    pytest.param(
        WIDGET_CRD + "---\n" + widget("{}").replace("example.com/v1", "example.com/v0"),
        [
            "31: example.com/Widget/w: .apiVersion: example.com/v0 has no kind Widget in "
            "Kubernetes v1.34.4 or the revision's CRDs; Widget is served as example.com/v1"
        ],
        id="a version the CRD does not serve",
    ),
]


@pytest.mark.parametrize(("text", "expected"), INVALID)
def test_every_problem_is_named_with_its_line_object_and_field(
    text: str, expected: list[str]
) -> None:
    assert problems(text) == expected


def test_a_secret_value_never_appears_in_a_problem() -> None:
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n"
        "stringData: {password: [hunter2-s3cret]}\nimmutable: hunter2-s3cret\n"
        "type: {hunter2-s3cret: 1}\n"
    )

    found = problems(secret)

    assert found == [
        "1: Secret/db: .immutable: must be boolean, not string",
        "1: Secret/db: .stringData.password: must be string, not array",
        "1: Secret/db: .type: must be string, not object",
    ]
    assert not any("hunter2" in line for line in found)


def test_a_cluster_s_catalogue_serves_its_own_kinds_and_schemas() -> None:
    """`validate --cluster`: the kinds discovery lists, with the schemas of the cluster's
    OpenAPI v3 documents (here one, for a CRD installed there)."""
    served = [
        Resource("example.com", "v1", "Gadget", "gadgets", namespaced=True),
        Resource("example.com", "v2", "Gadget", "gadgets", namespaced=True),
    ]
    document = {
        "components": {
            "schemas": {
                "com.example.v1.Gadget": {
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "properties": {"n": {}}},
                    },
                    "x-kubernetes-group-version-kind": [
                        {"group": "example.com", "version": "v1", "kind": "Gadget"}
                    ],
                }
            }
        }
    }
    cluster = validation.served(served, {"example.com/v1": document})
    gadget = "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\nspec: {m: 1}\n"

    assert problems(gadget, cluster) == [
        "1: example.com/Gadget/g: .spec.m: field not declared in schema"
    ]
    assert problems(gadget.replace("/v1", "/v2"), cluster) == [
        "1: example.com/Gadget/g: .kind: the cluster serves Gadget example.com/v2 but "
        "publishes no schema of it (a CRD's follows it shortly after it is installed), so it "
        "cannot be checked"
    ]
    assert problems(DEPLOYMENT, cluster) == [
        "1: apps/Deployment/shop/web: .kind: apps/v1 has no kind Deployment in the "
        "cluster or the revision's CRDs, so there is no schema to check it against"
    ]


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ('{$ref: "https://example.com/size"}', "Unresolvable: https://example.com/size"),
        ('{type: string, pattern: "(?<n>a)"}', "unknown extension ?<n at position 1"),
    ],
)
def test_a_crd_schema_that_cannot_be_used_is_a_problem_not_a_crash(schema: str, why: str) -> None:
    crd = WIDGET_CRD.replace("{type: integer, minimum: 1}", schema)

    assert problems(crd + "---\n" + widget("{size: b}")) == [
        f"31: example.com/Widget/w: the schema of Widget example.com/v1 cannot be used: {why}"
    ]


def test_a_problem_names_the_line_of_its_field_where_the_file_writes_it(tmp_path: Path) -> None:
    """The field's own line; a missing field's, its parent's; an item of a List (not in
    the file as read), its document's."""
    listed = (
        "apiVersion: v1\nkind: List\nitems:\n  - "
        + textwrap.indent("apiVersion: v1\nkind: Secrett\nmetadata: {name: c}\n", "    ").lstrip()
    )
    missing = DEPLOYMENT.replace("  selector: {matchLabels: {app: web}}\n", "")
    files = {
        "app.yaml": with_spec("replica: 2\n") + "---\n" + missing.replace("web", "api"),
        "kinds.yaml": "# a comment\napiVersion: v1\nkind: ConfigMapp\nmetadata: {name: c}\n",
        "list.yaml": listed,
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    positions = Positions(Directory(tmp_path), Limits())

    found = validation.check(load(tmp_path, ["."]), validation.built_in(), positions.origin_of)

    assert [f"{problem.origin}: {problem.path}" for problem in found] == [
        "app.yaml:5: .spec.replica",
        "app.yaml:17: .spec.selector",  # spec:, as the field is not there
        "kinds.yaml:3: .kind",
        "list.yaml:1: .kind",  # not the List's own kind, line 2
    ]
