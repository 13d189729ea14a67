"""gitopsd.manifests: hostile repository content is refused precisely and safely (the BI cases).

Every failure must name the file (and line) without echoing content, so the canary strings
planted below must never show up in an error.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from gitopsd.config import Limits
from gitopsd.errors import ManifestError, SourceError
from gitopsd.manifests import Directory, ParseCache, Tree, index, load, parse_documents
from gitopsd.objects import (
    APPLYSET_ID_LABEL,
    APPLYSET_PART_OF_LABEL,
    Manifest,
    ObjectKey,
    Origin,
    group_of,
    wave_of,
)
from tests.harness.hostile_names import HOSTILE_NAMES
from tests.harness.manifests import write

CANARY = "CANARY-4f1d2c9e"
LIMITS = Limits()


def cm(name: str, namespace: str = "ns", extra: str = "") -> str:
    """A valid ConfigMap of 5 lines (plus `extra`)."""
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        f"  namespace: {namespace}\n{extra}"
    )


def load_error(root: Path | Tree, paths: tuple[str, ...] = (".",), **options: Any) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load(root, paths, **options)
    return caught.value


def parse_error(text: str, path: str = "x.yaml", limits: Limits = LIMITS) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        parse_documents(text, path, limits)
    return caught.value


def origins(manifests: list[Manifest]) -> list[str]:
    return [str(manifest.origin) for manifest in manifests]


def names(manifests: list[Manifest]) -> list[str]:
    return [manifest.key.name for manifest in manifests]


# --- Loading valid manifests -----------------------------------------------------------


def test_load_builds_key_api_version_body_and_origin(tmp_path: Path) -> None:
    deployment = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: prod\n"
    )
    write(
        tmp_path,
        {
            "app.yaml": deployment + "---\n" + "apiVersion: v1\nkind: Namespace\n"
            "metadata:\n  name: prod\n"
        },
    )

    first, second = load(tmp_path, ["."])

    assert first.key == ObjectKey("apps", "Deployment", "prod", "web")
    assert first.api_version == "apps/v1"
    assert first.origin == Origin("app.yaml", 1)
    assert first.body == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "prod"},
    }
    assert second.key == ObjectKey("", "Namespace", "", "prod")
    assert second.origin == Origin("app.yaml", 7)


def test_parse_documents_gives_start_lines_and_drops_empty_documents() -> None:
    text = "# header\n\nkind: A\n---\n---\nnull\n---\n# only a comment\n---\nkind: B\n...\n"

    assert parse_documents(text, "x.yaml", LIMITS) == [(3, {"kind": "A"}), (10, {"kind": "B"})]


# --- BI-01 malformed YAML --------------------------------------------------------------


@pytest.mark.case("BI-01")
@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param("a: 'x\nb: c\n", "3:1", id="unclosed-single-quote"),
        pytest.param('key: "open\n', "2:1", id="unclosed-double-quote"),
        pytest.param("a: b\n c: d\n", "2:3", id="bad-indent"),
        pytest.param("a:\n\tb: c\n", "2:1", id="tab-indent"),
        pytest.param("a: [1, 2\n", "2:1", id="unclosed-flow-sequence"),
        pytest.param("a: b: c\n", "1:5", id="mapping-in-scalar"),
        pytest.param("- a\nb: c\n", "2:1", id="mixed-block"),
        pytest.param("a: *nope\n", "1:4", id="undefined-alias"),
        pytest.param("a: &x 1\nb: &x 2\n", "2:4", id="duplicate-anchor"),
    ],
)
def test_malformed_yaml_reports_path_line_and_column(text: str, where: str) -> None:
    error = parse_error(text, "apps/x.yaml")

    assert error.reason == "syntax"
    assert str(error).startswith(f"apps/x.yaml:{where}: ")


@pytest.mark.case("BI-01")
def test_one_malformed_file_among_fifty_fails_the_whole_load(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {f"apps/f{n:02}.yaml": cm(f"c{n}") for n in range(50)}
    files["apps/f25.yaml"] = cm("c25") + "data:\n  a: 'unclosed\n"
    write(tmp_path, files)

    error = load_error(tmp_path)

    assert error.reason == "syntax"
    assert re.match(r"apps/f25\.yaml:8:1: ", str(error))


@pytest.mark.case("BI-01")
def test_control_characters_are_a_syntax_error_with_a_line() -> None:
    error = parse_error("a: 1\nb: \x01\n")

    assert error.reason == "syntax"
    assert str(error).startswith("x.yaml:2: ")


# --- BI-02 duplicate keys --------------------------------------------------------------


@pytest.mark.case("BI-02")
@pytest.mark.parametrize(
    ("text", "key", "first", "second"),
    [
        pytest.param("spec:\n  replicas: 1\n  replicas: 5\n", "'replicas'", 2, 3, id="replicas"),
        pytest.param(
            "metadata:\n  name: a\nkind: X\nmetadata:\n  name: b\n",
            "'metadata'",
            1,
            4,
            id="metadata",
        ),
        pytest.param("a: 1\n---\nx: {b: 1,\n  b: 2}\n", "'b'", 3, 4, id="flow-mapping"),
        pytest.param("x: 1\non: 1\nyes: 2\n", "True", 2, 3, id="equal-after-resolution"),
        pytest.param("a: &m {k: 1}\nb:\n  <<: *m\n  <<: *m\n", "'<<'", 3, 4, id="merge-twice"),
    ],
)
def test_duplicate_keys_name_both_lines(text: str, key: str, first: int, second: int) -> None:
    error = parse_error(text)

    assert error.reason == "duplicate_key"
    assert str(error).startswith(f"x.yaml:{second}:")
    assert f"duplicate key {key} at lines {first} and {second}" in str(error)


@pytest.mark.case("BI-02")
def test_duplicate_key_in_a_secret_names_the_key_but_never_the_value() -> None:
    text = f"kind: Secret\nstringData:\n  password: {CANARY}\n  password: {CANARY}-2\n"

    error = parse_error(text)

    assert error.reason == "duplicate_key"
    assert "'password'" in str(error)
    assert CANARY not in str(error)


@pytest.mark.case("BI-02")
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("b: &b {a: 1}\nd: {<<: *b, a: 2}\n", id="explicit-key-overrides-merge"),
        pytest.param("b: &b {a: 1}\nc: &c {a: 3}\nd: {<<: [*b, *c]}\n", id="merge-list"),
        # The merge into `other` flattens `d` before `d` itself is built: still not a duplicate.
        pytest.param(
            "b: &b {a: 1}\nl:\n  - &d {<<: *b, a: 2}\nother: {<<: *d}\n", id="flattened-early"
        ),
    ],
)
def test_merge_keys_are_not_duplicate_keys(text: str) -> None:
    [(_line, data)] = parse_documents(text, "x.yaml", LIMITS)

    assert data["b"] == {"a": 1}
    assert data.get("d", data.get("other")) in ({"a": 2}, {"a": 1})


# --- BI-03 duplicate objects -----------------------------------------------------------


@pytest.mark.case("BI-03")
def test_the_same_object_in_two_files_is_rejected_naming_both(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("app"), "b.yaml": cm("other") + "---\n" + cm("app")})
    manifests = load(tmp_path, ["."])

    with pytest.raises(ManifestError) as caught:
        index(manifests)

    assert caught.value.reason == "duplicate_object"
    assert str(caught.value).startswith("b.yaml:7: ")
    assert "duplicate object ConfigMap/ns/app: a.yaml:1 and b.yaml:7" in str(caught.value)


@pytest.mark.case("BI-03")
@pytest.mark.parametrize(
    ("first", "second", "duplicate"),
    [
        pytest.param(
            ("apps/v1", "Deployment", "ns"),
            ("apps/v1beta1", "Deployment", "ns"),
            True,
            id="versions-of-one-group",
        ),
        pytest.param(
            ("apps/v1", "Deployment", "ns"),
            ("apps/v1", "Deployment", "other"),
            False,
            id="other-namespace",
        ),
        pytest.param(("v1", "ConfigMap", "ns"), ("v1", "Secret", "ns"), False, id="other-kind"),
        pytest.param(
            ("v1", "Service", "ns"),
            ("serving.knative.dev/v1", "Service", "ns"),
            False,
            id="other-group",
        ),
    ],
)
def test_identity_is_group_kind_namespace_name(
    first: tuple[str, str, str], second: tuple[str, str, str], duplicate: bool
) -> None:
    def manifest(api_version: str, kind: str, namespace: str, line: int) -> Manifest:
        key = ObjectKey(group_of(api_version), kind, namespace, "x")
        return Manifest(key, api_version, {"kind": kind}, Origin("x.yaml", line))

    pair = [manifest(*first, line=1), manifest(*second, line=5)]

    if duplicate:
        with pytest.raises(ManifestError, match="duplicate object apps/Deployment/ns/x"):
            index(pair)
    else:
        assert list(index(pair).values()) == pair


# --- SE-11, BI-14 names and namespaces --------------------------------------------------


def named(name: str, namespace: str = "ns") -> str:
    # JSON strings are YAML too: every hostile value is written exactly.
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {json.dumps(name)}\n"
        f"  namespace: {json.dumps(namespace)}\n"
    )


@pytest.mark.case("SE-11", "BI-14")
@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_se11_hostile_names_are_refused_when_read(tmp_path: Path, name: str) -> None:
    write(tmp_path, {"bad.yaml": "# a comment\n" + named(name)})

    error = load_error(tmp_path)

    assert error.reason == "invalid"
    assert str(error).startswith("bad.yaml:2: document 1: ConfigMap metadata.name ")
    assert "must be a DNS-1123 subdomain" in str(error)
    assert "x" * 81 not in str(error)  # a long value is cut short


@pytest.mark.case("SE-11", "BI-14")
@pytest.mark.parametrize("namespace", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_se11_hostile_namespaces_are_refused_when_read(tmp_path: Path, namespace: str) -> None:
    write(tmp_path, {"bad.yaml": named("ok", namespace)})

    error = load_error(tmp_path)

    assert error.reason == "invalid"
    assert str(error).startswith("bad.yaml:1: document 1: metadata.namespace ")
    assert "must be a DNS-1123 label" in str(error)
    assert "x" * 81 not in str(error)


RBAC = "rbac.authorization.k8s.io/v1"
# (apiVersion, kind, name, valid): each checked against kube-apiserver v1.34 by dry-run.
NAME_RULES = [
    ("v1", "ConfigMap", "a.b-1", True),
    ("v1", "ConfigMap", "x" * 253, True),
    ("v1", "ConfigMap", "x" * 254, False),
    ("v1", "ConfigMap", "a:b", False),
    ("v1", "ConfigMap", "a.", False),
    ("v1", "Namespace", "1abc", True),
    ("v1", "Namespace", "a.b", False),
    ("v1", "Namespace", "x" * 64, False),
    ("v1", "Service", "web", True),
    ("v1", "Service", "1web", False),
    ("v1", "Service", "a.b", False),
    (RBAC, "ClusterRole", "system:controller:x", True),
    (RBAC, "ClusterRole", "Upper_case é?", True),
    (RBAC, "ClusterRole", "..", False),
    (RBAC, "Role", "a/b", False),
    (RBAC, "RoleBinding", "a%b", False),
    (RBAC, "ClusterRoleBinding", "system:public-info-viewer", True),
    ("certificates.k8s.io/v1", "CertificateSigningRequest", "node-csr-AbC_1:x", True),
    ("networking.k8s.io/v1", "IPAddress", "2001:db8::1", True),
    ("v1", "Event", "Any:name", True),
    ("events.k8s.io/v1", "Event", "Any:name", False),
    ("scheduling.k8s.io/v1", "PriorityClass", "system-node-critical", True),
    ("storage.k8s.io/v1", "StorageClass", "gp3.encrypted", True),
    ("example.com/v1", "Service", "a.b", True),  # a custom kind: the subdomain rule
    ("example.com/v1", "ClusterRole", "a:b", False),
]


@pytest.mark.case("BI-14", "SE-11")
@pytest.mark.parametrize(("api_version", "kind", "name", "valid"), NAME_RULES)
def test_bi14_names_follow_the_rule_of_their_kind(
    tmp_path: Path, api_version: str, kind: str, name: str, valid: bool
) -> None:
    text = f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {json.dumps(name)}\n"
    write(tmp_path, {"x.yaml": text})

    if valid:
        assert names(load(tmp_path, ["."])) == [name]
    else:
        assert "metadata.name" in str(load_error(tmp_path))


# --- BI-07, LD-05 size limits ---------------------------------------------------------

REVISION_FLAG = "(--max-revision-bytes, limits.maxRevisionBytes)"
OBJECT_FLAG = "(--max-object-bytes, limits.maxObjectBytes)"
DOCUMENTS_FLAG = "(--max-documents, limits.maxDocuments)"


@pytest.mark.case("BI-07", "LD-05")
def test_bi07_a_file_past_the_revision_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("a"), "big.yaml": b"\xff" * 101})  # unreadable if read
    limit = len(cm("a")) + 100

    error = load_error(tmp_path, limits=Limits(max_revision_bytes=limit))

    assert error.reason == "size_limit"
    assert str(error) == (
        f"big.yaml: the revision's manifests reach {limit + 1} bytes, "
        f"over the per-revision limit of {limit} bytes {REVISION_FLAG}"
    )


@pytest.mark.case("BI-07", "LD-05")
def test_bi07_the_revision_limit_is_the_sum_of_its_files(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("a"), "b.yaml": cm("b")})

    load(tmp_path, ["."], limits=Limits(max_revision_bytes=2 * len(cm("a"))))
    error = load_error(tmp_path, limits=Limits(max_revision_bytes=2 * len(cm("a")) - 1))

    assert str(error).startswith("b.yaml: the revision's manifests reach ")


@pytest.mark.case("LD-05", "BI-07")
def test_ld05_an_object_over_the_limit_is_refused_naming_its_line(tmp_path: Path) -> None:
    big = cm("big", extra=f"data:\n  k: {'x' * 2000}\n")
    write(tmp_path, {"big.yaml": f"{cm('a')}---\n{big}"})

    error = load_error(tmp_path, limits=Limits(max_object_bytes=1024))

    assert error.reason == "size_limit"
    assert re.fullmatch(
        rf"big\.yaml:6:1: object is 2\.\d KiB, over the per-object limit of 1 KiB "
        rf"{re.escape(OBJECT_FLAG)}",
        str(error),
    ), str(error)


@pytest.mark.case("LD-05", "BI-07")
def test_ld05_objects_are_measured_in_bytes(tmp_path: Path) -> None:
    text = cm("a", extra=f"data:\n  k: {'€' * 400}\n")  # 1,200 bytes of value in 400 characters
    write(tmp_path, {"a.yaml": text})

    assert load(tmp_path, ["."], limits=Limits(max_object_bytes=len(text.encode())))
    assert len(text) < 1200
    assert load_error(tmp_path, limits=Limits(max_object_bytes=1200)).reason == "size_limit"


@pytest.mark.case("BI-07", "LD-05")
def test_bi07_many_objects_may_share_a_file_larger_than_one_object(tmp_path: Path) -> None:
    objects = [cm(f"c{i}", extra=f"data:\n  k: '{i:0400}'\n") for i in range(30)]
    text = "---\n" + "---\n".join(objects)
    write(tmp_path, {"many.yaml": text})

    manifests = load(tmp_path, ["."], limits=Limits(max_object_bytes=1024))

    assert len(manifests) == 30 and len(text) > 10 * 1024


@pytest.mark.case("LD-05", "BI-07")
def test_ld05_a_json_file_is_one_object_refused_before_it_is_read(tmp_path: Path) -> None:
    write(tmp_path, {"big.json": b"\xff" * 101})

    error = load_error(tmp_path, limits=Limits(max_object_bytes=100))

    assert (
        str(error)
        == f"big.json: object is 101 bytes, over the per-object limit of 100 bytes {OBJECT_FLAG}"
    )


@pytest.mark.case("BI-07", "LD-05")
def test_bi07_documents_are_counted_over_the_whole_revision(tmp_path: Path) -> None:
    six = "".join(f"---\n{cm(f'{name}{i}')}" for name in "x" for i in range(6))
    write(tmp_path, {"a.yaml": six, "b.yaml": six.replace("x", "y")})

    error = load_error(tmp_path, limits=Limits(max_documents=10))

    assert error.reason == "size_limit"
    fifth = 4 * 6 + 2  # five lines per object after its `---`
    assert str(error) == (
        f"b.yaml:{fifth}: more than 10 YAML documents, the per-revision limit {DOCUMENTS_FLAG}"
    )


@pytest.mark.case("BI-07", "LD-05")
@pytest.mark.parametrize(
    ("text", "limits", "line"),
    [
        pytest.param("---\n" * 11, Limits(max_documents=10), 11, id="eleven-of-ten"),
        pytest.param("---\n" * 200_000, LIMITS, 50_001, id="200k-documents"),
    ],
)
def test_bi07_one_file_is_stopped_at_the_document_limit_while_parsed(
    text: str, limits: Limits, line: int
) -> None:
    error = parse_error(text, limits=limits)

    assert error.reason == "size_limit"
    assert str(error) == (
        f"x.yaml:{line}:1: more than {limits.max_documents} YAML documents, "
        f"the per-revision limit {DOCUMENTS_FLAG}"
    )


# --- BI-08 aliases ---------------------------------------------------------------------


def billion_laughs(levels: int = 9, refs: int = 9) -> str:
    lines = ["a0: &a0 lol"]
    for level in range(1, levels + 1):
        refs_text = ", ".join([f"*a{level - 1}"] * refs)
        lines.append(f"a{level}: &a{level} [{refs_text}]")
    return "\n".join(lines) + "\n"


@pytest.mark.case("BI-08")
def test_billion_laughs_is_rejected_quickly() -> None:
    started = time.perf_counter()

    error = parse_error(billion_laughs())

    assert error.reason == "alias_limit"
    assert str(error).startswith("x.yaml:1:")
    assert time.perf_counter() - started < 1


@pytest.mark.case("BI-08")
@pytest.mark.parametrize(
    ("text", "limits", "reason"),
    [
        pytest.param(
            "a: &a x\nb: [" + ", ".join(["*a"] * 101) + "]\n",
            LIMITS,
            "alias_limit",
            id="101-aliases",
        ),
        pytest.param("a: &a x\n---\nb: &b [*b]\n", LIMITS, "alias_limit", id="recursive"),
        pytest.param(
            "a: &a [" + ", ".join(["x"] * 2_000) + "]\nb: [*a, *a, *a, *a, *a, *a]\n",
            Limits(max_expansion=3),
            "alias_limit",
            id="expansion-ratio",
        ),
        # Written depth is 5, but *a puts a 4-deep list under b's list: 6 levels.
        pytest.param(
            "a: &a [[[[1]]]]\nb: [*a]\n", Limits(max_depth=5), "depth_limit", id="expanded-depth"
        ),
    ],
)
def test_alias_budgets(text: str, limits: Limits, reason: str) -> None:
    assert parse_error(text, limits=limits).reason == reason


@pytest.mark.case("BI-08")
def test_aliases_under_budget_load_correctly_and_unshared(tmp_path: Path) -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\n"
        "metadata:\n  name: web\n  labels: &labels {app: web}\n"
        "spec:\n  selector:\n    matchLabels: *labels\n"
        "  template:\n    metadata:\n      labels:\n        <<: *labels\n        tier: front\n"
    )
    write(tmp_path, {"web.yaml": text})

    [manifest] = load(tmp_path, ["."])

    body = manifest.body
    assert body["spec"]["selector"]["matchLabels"] == {"app": "web"}
    assert body["spec"]["template"]["metadata"]["labels"] == {"app": "web", "tier": "front"}
    body["metadata"]["labels"]["app"] = "changed"  # an alias is a copy, not a shared object
    assert body["spec"]["selector"]["matchLabels"] == {"app": "web"}


@pytest.mark.case("BI-08")
def test_expansion_under_the_floor_is_always_allowed() -> None:
    # 9 x 9 x 9 nodes = under 10,000, though far over 10 times the nodes written.
    [(_line, data)] = parse_documents(billion_laughs(levels=3), "x.yaml", LIMITS)

    assert len(data["a3"]) == 9 and data["a3"][0][0] == ["lol"] * 9


# --- BI-09 deep nesting ----------------------------------------------------------------


@pytest.mark.case("BI-09")
@pytest.mark.parametrize(
    ("text", "path"),
    [
        pytest.param("[" * 20_000, "x.yaml", id="flow-sequences"),
        pytest.param("{a: " * 20_000, "x.yaml", id="flow-mappings"),
        pytest.param("- " * 20_000 + "x\n", "x.yaml", id="block-sequences"),
        pytest.param("[" * 20_000, "x.json", id="json-arrays"),
        pytest.param('{"a": ' * 20_000, "x.json", id="json-objects"),
    ],
)
def test_deep_nesting_is_a_clean_depth_error(text: str, path: str) -> None:
    error = parse_error(text, path)  # a RecursionError would escape pytest.raises

    assert error.reason == "depth_limit"
    assert str(error).startswith(f"{path}:1")
    assert "limit of 100 levels" in str(error)


@pytest.mark.case("BI-09")
@pytest.mark.parametrize(
    ("text", "ok"),
    [
        pytest.param("a: {b: {c: 1}}\n", True, id="at-the-limit"),
        pytest.param("a: {b: {c: {d: 1}}}\n", False, id="one-over"),
        pytest.param("a:\n  - b: 1\n", True, id="block-at-the-limit"),
        pytest.param("a:\n  - b:\n      - 1\n", False, id="block-one-over"),
    ],
)
def test_depth_limit_boundary(text: str, ok: bool) -> None:
    limits = Limits(max_depth=3)
    if ok:
        assert parse_documents(text, "x.yaml", limits)
    else:
        assert parse_error(text, limits=limits).reason == "depth_limit"


# --- BI-10, BI-11 encodings ------------------------------------------------------------


@pytest.mark.case("BI-10", "BI-11")
@pytest.mark.parametrize(
    ("content", "line", "offset"),
    [
        pytest.param(b"a: 1\n\x00b: 2\n", 2, 5, id="nul-byte"),
        pytest.param("a: 1\nb: café\n".encode("latin-1"), 2, 11, id="latin-1"),
        pytest.param("a: 1\n".encode("utf-16"), 1, 3, id="utf-16-with-bom"),
        pytest.param(b"a: \xc0\xaf\n", 1, 3, id="overlong"),
        pytest.param(b"a: \xed\xa0\x80\n", 1, 3, id="lone-surrogate"),
        pytest.param(b"\xef\xbb\xbfa: \xff\n", 1, 6, id="bom-then-invalid"),
    ],
)
def test_non_utf8_is_an_encoding_error_with_byte_offset(
    tmp_path: Path, content: bytes, line: int, offset: int
) -> None:
    write(tmp_path, {"bad.yaml": content})

    error = load_error(tmp_path)

    assert error.reason == "encoding"
    assert str(error).startswith(f"bad.yaml:{line}: ")
    assert f"byte offset {offset}" in str(error)


@pytest.mark.case("BI-10", "BI-11")
def test_a_utf8_bom_is_allowed(tmp_path: Path) -> None:
    write(tmp_path, {"bom.yaml": b"\xef\xbb\xbf" + cm("a", extra="data: {k: café}\n").encode()})

    assert [m.body["data"] for m in load(tmp_path, ["."])] == [{"k": "café"}]


@pytest.mark.case("BI-10", "BI-11")
def test_binary_files_without_a_manifest_extension_are_skipped(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
            "tool": b"\x7fELF\x02\x01\x01\x00\x00",
            "a.yaml": cm("a"),
        },
    )

    assert origins(load(tmp_path, ["."])) == ["a.yaml:1"]


@pytest.mark.case("BI-10", "BI-11")
def test_a_fifo_named_like_a_manifest_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")

    error = load_error(tmp_path)

    assert error.reason == "invalid"
    assert str(error) == "pipe.yaml: not a regular file"


# --- BI-12 symlinks and configured paths -----------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository next to an `outside` directory holding a valid-looking canary manifest."""
    canary = cm(CANARY.lower(), extra=f"data: {{v: {CANARY}}}\n")  # would load if followed
    write(tmp_path / "outside", {"canary.yaml": canary})
    return write(tmp_path / "repo", {"real.yaml": cm("real"), "sub/real.yaml": cm("sub")})


def link(root: Path, rel: str, target: str) -> str:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).symlink_to(target)
    return rel


@pytest.mark.case("BI-12")
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda r: link(r, "x.yaml", "/etc/passwd"), id="a-absolute-system-file"),
        pytest.param(
            lambda r: link(r, "x.yaml", str(r.parent / "outside/canary.yaml")),
            id="a-absolute-canary",
        ),
        pytest.param(lambda r: link(r, "x.yaml", "../outside/canary.yaml"), id="b-escaping"),
        pytest.param(lambda r: link(r, "b", "../..") and link(r, "a", "b"), id="c-chain"),
        pytest.param(lambda r: link(r, "d", "."), id="d-directory-loop"),
        pytest.param(lambda r: link(r, "sub/x.yaml", "../sub/real.yaml"), id="e-through-dotdot"),
        pytest.param(lambda r: link(r, "x.yaml", str(r / "real.yaml")), id="f-absolute-in-repo"),
        pytest.param(lambda r: link(r, "ext", "../outside"), id="directory-outside"),
        pytest.param(
            lambda r: link(r, "notes.txt", "../outside/canary.yaml"), id="not-a-manifest-name"
        ),
        pytest.param(
            lambda r: link(r, "sub/kustomization.yaml", "../real.yaml"), id="kustomization-marker"
        ),
    ],
)
def test_symlinks_are_refused_and_the_canary_never_leaks(
    repo: Path, make: Callable[[Path], str]
) -> None:
    rel = make(repo)

    error = load_error(repo, render_kustomization=lambda root, path, limits, max_bytes: "")

    assert error.reason == "symlink"
    assert str(error).startswith(f"{rel}: ")
    assert CANARY not in str(error) and CANARY.lower() not in str(error)
    assert "outside" not in str(error)  # the target is not named


@pytest.mark.case("BI-12")
def test_a_symlink_component_of_a_configured_path_is_refused(repo: Path) -> None:
    link(repo, "ext", "../outside")

    error = load_error(repo, ("ext/canary.yaml",))

    assert error.reason == "symlink"
    assert str(error).startswith("ext: ")
    assert CANARY not in str(error)


@pytest.mark.case("BI-12")
def test_an_excluded_symlink_is_never_met(repo: Path) -> None:
    link(repo, "vendor/x.yaml", "../../outside/canary.yaml")

    assert names(load(repo, ["."], exclude=["vendor/*"])) == ["real", "sub"]


@pytest.mark.case("BI-12")
@pytest.mark.parametrize(
    ("path", "reason", "message"),
    [
        pytest.param("/etc", "path_escape", "/etc: path must stay inside", id="absolute"),
        pytest.param("../outside", "path_escape", "../outside: path must stay", id="dotdot"),
        pytest.param("sub/../../outside", "path_escape", "sub/../../outside: ", id="deep-dotdot"),
        pytest.param("sub/../sub", "path_escape", "sub/../sub: ", id="dotdot-coming-back"),
        pytest.param("sub\0x", "path_escape", "sub\\0x: ", id="nul"),
        pytest.param(
            "missing",
            "invalid",
            "path missing not found in the revision; the root holds real.yaml, sub",
            id="missing",
        ),
        pytest.param(
            "sub/typo",
            "invalid",
            "path sub/typo not found in the revision; sub/ holds real.yaml",
            id="missing-below",
        ),
        pytest.param(
            "real.yaml/x",
            "invalid",
            "path real.yaml/x not found in the revision",
            id="under-a-file",
        ),
    ],
)
def test_configured_paths_are_checked(repo: Path, path: str, reason: str, message: str) -> None:
    error = load_error(repo, (path,))

    assert error.reason == reason
    assert str(error).startswith(message)
    assert reason != "invalid" or str(error) == message  # the listing, and nothing more
    assert CANARY not in str(error)


@pytest.mark.case("BI-12")
@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        pytest.param((".",), ["real.yaml:1", "sub/real.yaml:1"], id="root"),
        pytest.param(("",), ["real.yaml:1", "sub/real.yaml:1"], id="empty-is-root"),
        pytest.param(("./sub",), ["sub/real.yaml:1"], id="directory"),
        pytest.param(("sub/real.yaml",), ["sub/real.yaml:1"], id="single-file"),
        pytest.param(("sub", "."), ["sub/real.yaml:1", "real.yaml:1"], id="overlap-read-once"),
    ],
)
def test_configured_paths_select_files(
    repo: Path, paths: tuple[str, ...], expected: list[str]
) -> None:
    assert origins(load(repo, paths)) == expected


@pytest.mark.case("BI-12")
def test_a_file_named_in_the_config_is_read_whatever_its_extension(tmp_path: Path) -> None:
    write(tmp_path, {"manifests.txt": cm("a")})

    assert names(load(tmp_path, ["manifests.txt"])) == ["a"]


# --- BI-16 odd document streams --------------------------------------------------------


LIST = "apiVersion: v1\nkind: List\nitems:\n"


@pytest.mark.case("BI-16")
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", [], id="empty-file"),
        pytest.param("---\n", [], id="separator-only"),
        pytest.param("null\n---\n~\n", [], id="null-documents"),
        pytest.param("# just a comment\n# and another\n", [], id="comments-only"),
        pytest.param(cm("a") + "---\n---\n" + cm("b"), ["a:1", "b:8"], id="empty-between"),
        pytest.param(
            LIST + "- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"
            "- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n",
            ["a:1", "b:1"],
            id="list",
        ),
        pytest.param(
            "apiVersion: v1\nkind: ConfigMapList\nitems:\n- " + cm("a").replace("\n", "\n  "),
            ["a:1"],
            id="typed-list",
        ),
        pytest.param(LIST + "  []\n", [], id="empty-list"),
    ],
)
def test_odd_streams(tmp_path: Path, text: str, expected: list[str]) -> None:
    write(tmp_path, {"x.yaml": text})

    manifests = load(tmp_path, ["."])

    assert [f"{m.key.name}:{m.origin.line}" for m in manifests] == expected


@pytest.mark.case("BI-16")
@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            cm("a") + "---\nkind: ConfigMap\nmetadata: {name: b}\n",
            "x.yaml:7: document 2: apiVersion must be a non-empty string",
            id="missing-apiVersion",
        ),
        pytest.param(
            "apiVersion: 1\nkind: X\nmetadata: {name: a}\n",
            "x.yaml:1: document 1: apiVersion must be",
            id="apiVersion-not-string",
        ),
        pytest.param(
            "apiVersion: v1\nmetadata: {name: a}\n",
            "x.yaml:1: document 1: kind must be",
            id="missing-kind",
        ),
        pytest.param(
            "apiVersion: v1\nkind: X\nmetadata: {namespace: a}\n",
            "x.yaml:1: document 1: metadata.name must be",
            id="missing-name",
        ),
        pytest.param(
            "apiVersion: v1\nkind: X\nmetadata: {name: ''}\n",
            "x.yaml:1: document 1: metadata.name must be",
            id="empty-name",
        ),
        pytest.param(
            "apiVersion: v1\nkind: X\n",
            "x.yaml:1: document 1: metadata is not a mapping",
            id="missing-metadata",
        ),
        pytest.param(
            "apiVersion: v1\nkind: X\nmetadata: {name: a, namespace: 5}\n",
            "x.yaml:1: document 1: metadata.namespace must be a string",
            id="namespace-not-string",
        ),
        pytest.param(
            "apiVersion: v1\nkind: X\nmetadata: {name: a, labels: [x]}\n",
            "x.yaml:1: document 1: metadata.labels must be a mapping",
            id="labels-not-mapping",
        ),
        pytest.param("just text\n", "x.yaml:1: document 1 is not a mapping", id="scalar"),
        pytest.param(
            cm("a") + "---\n- a\n", "x.yaml:7: document 2 is not a mapping", id="sequence"
        ),
        pytest.param(
            LIST + "- " + "{apiVersion: v1, kind: X, metadata: {name: a}}\n- 7\n",
            "x.yaml:1: document 1 item 2 is not a mapping",
            id="list-item",
        ),
        pytest.param(
            LIST + "- {kind: X, metadata: {name: a}}\n",
            "x.yaml:1: document 1 item 1: apiVersion must be",
            id="list-item-field",
        ),
    ],
)
def test_invalid_documents_name_the_file_line_document_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    write(tmp_path, {"x.yaml": text})

    error = load_error(tmp_path)

    assert error.reason == "invalid"
    assert str(error).startswith(message)


# --- BI-17 tags ------------------------------------------------------------------------


@pytest.mark.case("BI-17")
@pytest.mark.parametrize(
    ("template", "tag"),
    [
        pytest.param(
            "a: !!python/object/apply:os.system ['touch {sentinel}']\n",
            "python/object/apply:os.system",
            id="python-apply",
        ),
        pytest.param(
            "a: !!python/object/new:subprocess.check_output [[touch, '{sentinel}']]\n",
            "python/object/new",
            id="python-new",
        ),
        pytest.param("a: !!python/tuple [1, 2]\n", "python/tuple", id="python-tuple"),
        pytest.param("a: !!binary aGVsbG8=\n", "binary", id="binary"),
        pytest.param("a: !foo bar\n", "!foo", id="custom"),
        pytest.param("--- !foo\nkind: X\n", "!foo", id="custom-on-document"),
        pytest.param("a: !<tag:example.com,2000:x> y\n", "tag:example.com,2000:x", id="verbatim"),
        pytest.param("a: !!set {x, y}\n", "set", id="set"),
        pytest.param("a: !!omap [b: 1]\n", "omap", id="omap"),
        pytest.param("a: !!timestamp 2024-01-01\n", "timestamp", id="timestamp"),
    ],
)
def test_non_core_tags_are_forbidden_and_nothing_runs(
    tmp_path: Path, template: str, tag: str
) -> None:
    sentinel = tmp_path / "pwned"

    error = parse_error(template.replace("{sentinel}", str(sentinel)))

    assert error.reason == "forbidden_tag"
    assert re.match(r"x\.yaml:\d+:\d+: tag ", str(error))
    assert tag in str(error)
    assert not sentinel.exists()


@pytest.mark.case("BI-17")
@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("a: !!str 10\n", "10", id="str"),
        pytest.param("a: !!int '7'\n", 7, id="int"),
        pytest.param("a: !!float '1'\n", 1.0, id="float"),
        pytest.param("a: !!bool 'true'\n", True, id="bool"),
        pytest.param("a: !!null ''\n", None, id="null"),
        pytest.param("a: !!map {b: 1}\n", {"b": 1}, id="map"),
        pytest.param("a: !!seq [1]\n", [1], id="seq"),
        pytest.param("a: ! 12\n", 12, id="non-specific-resolves-like-plain"),
        pytest.param("a: <<\n", "<<", id="merge-as-value"),
    ],
)
def test_core_tags_are_allowed(text: str, value: Any) -> None:
    assert parse_documents(text, "x.yaml", LIMITS) == [(1, {"a": value})]


# --- sync waves ----------------------------------------------------------------------


@pytest.mark.parametrize("wave", ["'soon'", "1", "'1.5'", "'9999999999'", "'-'", "''", "[1]"])
def test_a_sync_wave_that_is_not_a_quoted_whole_number_is_refused(
    tmp_path: Path, wave: str
) -> None:
    annotations = f"{{gitopsd.io/sync-wave: {wave}}}"
    doc = f"{{apiVersion: v1, kind: ConfigMap, metadata: {{name: a, annotations: {annotations}}}}}"
    write(tmp_path, {"x.yaml": doc})

    error = load_error(tmp_path)

    assert str(error).startswith("x.yaml:1: document 1: annotation gitopsd.io/sync-wave must")


@pytest.mark.parametrize(("wave", "number"), [("'-3'", -3), ("'+2'", 2), ("'0'", 0), (None, 0)])
def test_a_sync_wave_is_read(tmp_path: Path, wave: str | None, number: int) -> None:
    annotations = f", annotations: {{gitopsd.io/sync-wave: {wave}}}" if wave else ""
    write(
        tmp_path,
        {"x.yaml": f"{{apiVersion: v1, kind: ConfigMap, metadata: {{name: a{annotations}}}}}"},
    )

    [manifest] = load(Directory(tmp_path), ["."], limits=LIMITS)

    assert wave_of(manifest.body) == number


# --- BI-19 ownership labels, SOPS ------------------------------------------------------


@pytest.mark.case("BI-19")
@pytest.mark.parametrize("label", [APPLYSET_PART_OF_LABEL, APPLYSET_ID_LABEL])
@pytest.mark.parametrize("wrapped", [False, True], ids=["document", "list-item"])
def test_applyset_labels_in_manifests_are_refused(
    tmp_path: Path, label: str, wrapped: bool
) -> None:
    doc = f"{{apiVersion: v1, kind: ConfigMap, metadata: {{name: a, labels: {{{label}: x}}}}}}"
    write(tmp_path, {"x.yaml": LIST + f"- {doc}\n" if wrapped else doc})

    error = load_error(tmp_path)

    assert error.reason == "owner_label"
    assert str(error).startswith("x.yaml:1: document 1")
    assert label in str(error)


@pytest.mark.case("BI-19")
def test_other_applyset_names_in_labels_are_fine(tmp_path: Path) -> None:
    write(tmp_path, {"x.yaml": cm("a").replace("  name: a\n", "  name: a\n  labels: {app: x}\n")})

    assert names(load(tmp_path, ["."])) == ["a"]


@pytest.mark.case("SE-18")
def test_a_sops_encrypted_secret_is_refused_without_its_values(tmp_path: Path) -> None:
    """SE-18."""
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n"
        f"data: {{password: {CANARY}}}\nsops: {{mac: {CANARY}, version: 3.8.1}}\n"
    )
    write(tmp_path, {"secret.yaml": secret, "cm.yaml": cm("a", extra="sops: {}\n")})

    error = load_error(tmp_path, ("secret.yaml",))

    assert error.reason == "invalid"
    assert str(error).startswith("secret.yaml:1: ")
    assert "carries SOPS metadata that is no encrypted file's" in str(error)
    assert CANARY not in str(error)
    assert names(load(tmp_path, ["cm.yaml"])) == ["a"]  # only Secrets carry SOPS


SECRET = "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n"


@pytest.mark.case("BI-18")
@pytest.mark.parametrize(
    "data",
    ["{password: c2VjcmV0}", '{password: "c2Vj\\ncmV0"}', "{}", "{empty: ''}", "null"],
    ids=["plain", "line-broken", "none", "empty value", "null"],
)
def test_a_secrets_base64_data_is_read(tmp_path: Path, data: str) -> None:
    write(tmp_path, {"secret.yaml": f"{SECRET}data: {data}\nstringData: {{raw: '*'}}\n"})

    assert names(load(tmp_path, ["."])) == ["db"]


@pytest.mark.case("BI-18", "SE-02")
@pytest.mark.parametrize(
    ("data", "says"),
    [
        (f"{{password: {CANARY}*}}", "key 'password' is not valid base64 (value not shown)"),
        ("{password: c2VjcmV}", "key 'password' is not valid base64"),  # unpadded
        ("{port: 5432}", "key 'port' is not valid base64"),
        (f"[{CANARY}]", "data must be a mapping"),
    ],
    ids=["not the alphabet", "unpadded", "a number", "a list"],
)
def test_bi18_a_secret_whose_data_is_not_base64_is_refused_naming_the_key_only(
    tmp_path: Path, data: str, says: str
) -> None:
    write(tmp_path, {"secret.yaml": f"{SECRET}data: {data}\n"})

    error = load_error(tmp_path, ("secret.yaml",))

    assert error.reason == "invalid"
    assert str(error).startswith("secret.yaml:1: document 1: Secret db: data")
    assert says in str(error)
    assert CANARY not in str(error) and "c2VjcmV" not in str(error)


@pytest.mark.case("SE-02")
@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"kind: Secret\ndata:\n  password: {CANARY}\n  bad: [\n", id="syntax"),
        pytest.param(f"kind: Secret\ndata:\n  password: '{CANARY}\n", id="unclosed-quote"),
        pytest.param(f"kind: Secret\ndata:\n  password: !!binary {CANARY}\n", id="tag"),
        pytest.param(f"kind: Secret\ndata:\n  password: {CANARY}\n  password: x\n", id="dup"),
        pytest.param(f"kind: Secret\ndata: {{password: {CANARY}}}\n\x01\n", id="control"),
        pytest.param(f"kind: Secret\ndata: {{password: {CANARY}}}\n", id="not-a-manifest"),
    ],
)
def test_errors_never_echo_secret_values(tmp_path: Path, text: str) -> None:
    write(tmp_path, {"s.yaml": text})

    error = load_error(tmp_path)

    assert CANARY not in str(error)
    assert str(error).startswith("s.yaml:")


# --- BI-22 YAML 1.1 types --------------------------------------------------------------


@pytest.mark.case("BI-22")
def test_yaml_1_1_types_and_dates_as_strings_golden() -> None:
    text = (
        "on: yes\noff: off\nquoted_yes: 'yes'\nmode: 0755\nhex: 0x1F\n"
        "exp: 1e3\nfloat: 1.5e+3\nno_sign: 1.5e3\n"
        'version: 1.10\nnothing: null\ntilde: ~\nquoted_null: "null"\nport: "8080"\n'
        "date: 2024-01-01\nstamp: 2001-12-14t21:59:43.10-05:00\nequals: =\nsexagesimal: 1:30\n"
    )

    [(_line, data)] = parse_documents(text, "x.yaml", LIMITS)

    assert data == {
        True: True,
        False: False,
        "quoted_yes": "yes",
        "mode": 0o755,
        "hex": 31,
        "exp": "1e3",  # YAML 1.1 floats need a dot
        "float": 1500.0,
        "no_sign": "1.5e3",  # nor does PyYAML take an exponent without a sign
        "version": 1.1,
        "nothing": None,
        "tilde": None,
        "quoted_null": "null",
        "port": "8080",
        "date": "2024-01-01",  # kubectl keeps dates as strings; so do we
        "stamp": "2001-12-14t21:59:43.10-05:00",
        "equals": "=",
        "sexagesimal": 90,
    }


@pytest.mark.case("BI-22")
def test_an_integer_too_long_to_convert_is_invalid_not_a_crash() -> None:
    error = parse_error("apiVersion: v1\nkind: X\nmetadata: {name: a}\nn: " + "9" * 5_000 + "\n")

    assert error.reason == "invalid"
    assert str(error) == "x.yaml:1: a number is too large"


# --- JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason", "message"),
    [
        pytest.param(
            '{"a": 1, "a": 2}', "duplicate_key", "x.json:1: duplicate key 'a'", id="duplicate-key"
        ),
        pytest.param('{\n  "a": [1,\n}', "syntax", "x.json:3:1: Expecting value", id="syntax"),
        pytest.param('{"a": NaN}', "syntax", "x.json:1: NaN is not valid JSON", id="nan"),
        pytest.param(
            '{"a": ' + "1" * 5_000 + "}",
            "invalid",
            "x.json:1: a number is too large",
            id="huge-number",
        ),
    ],
)
def test_json_errors(text: str, reason: str, message: str) -> None:
    error = parse_error(text, "x.json")

    assert error.reason == reason
    assert str(error) == message


def test_json_manifests_and_lists_load_with_line_one(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "a.json": '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}',
            "b.json": '{"kind": "List", "items": [\n'
            '  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"},'
            ' "data": {"k": "[b]{"}}]}',
            "empty.json": " \n",
        },
    )

    assert [f"{m.key.name}@{m.origin}" for m in load(tmp_path, ["."])] == [
        "a@a.json:1",
        "b@b.json:1",
    ]


# --- Order and selection ---------------------------------------------------------------


def test_order_is_stable_depth_first_by_name(tmp_path: Path) -> None:
    for rel in ["b.yaml", "a/z.yaml", "c.yml", "a/b/c.yaml", "0.json"]:
        content = cm(rel.replace("/", "-").replace(".", "-"))
        if rel.endswith(".json"):
            content = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}'
        write(tmp_path, {rel: content})

    first = load(tmp_path, ["."])

    assert origins(first) == [
        "0.json:1",
        "a/b/c.yaml:1",
        "a/z.yaml:1",
        "b.yaml:1",
        "c.yml:1",
    ]
    assert load(tmp_path, ["."]) == first


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        pytest.param(
            None, (), ["a.yaml", "b.yml", "c.json", "sub/e.yaml", "sub/skip.yaml"], id="defaults"
        ),
        pytest.param(("*.yaml",), (), ["a.yaml", "sub/e.yaml", "sub/skip.yaml"], id="include"),
        pytest.param(("e.*",), (), ["sub/e.yaml"], id="include-matches-the-name"),
        pytest.param(None, ("sub/*",), ["a.yaml", "b.yml", "c.json"], id="exclude-directory"),
        pytest.param(None, ("sub",), ["a.yaml", "b.yml", "c.json"], id="exclude-directory-name"),
        pytest.param(
            None, ("*skip*",), ["a.yaml", "b.yml", "c.json", "sub/e.yaml"], id="exclude-glob"
        ),
        pytest.param(
            None,
            ("sub/skip.yaml",),
            ["a.yaml", "b.yml", "c.json", "sub/e.yaml"],
            id="exclude-relative-path",
        ),
        pytest.param(
            None,
            ("skip.yaml",),
            ["a.yaml", "b.yml", "c.json", "sub/e.yaml", "sub/skip.yaml"],
            id="exclude-is-not-the-name",
        ),
    ],
)
def test_include_and_exclude_globs(
    tmp_path: Path, include: tuple[str, ...] | None, exclude: tuple[str, ...], expected: list[str]
) -> None:
    files: dict[str, str | bytes] = {
        rel: cm(rel.replace("/", "-").replace(".", "-"))
        for rel in ["a.yaml", "b.yml", "sub/e.yaml", "sub/skip.yaml"]
    }
    files["c.json"] = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}'
    files["d.txt"] = "not: [yaml"
    files["README.md"] = "# readme"
    files[".git/config.yaml"] = "broken: ["  # .git is never walked
    files["sub/.git/x.yaml"] = "broken: ["
    write(tmp_path, files)
    options: dict[str, Any] = {"exclude": exclude}
    if include is not None:
        options["include"] = include

    manifests = load(tmp_path, ["."], **options)

    assert [manifest.origin.path for manifest in manifests] == expected


# --- Kustomizations --------------------------------------------------------------------


class FakeRenderer:
    def __init__(self, output: str) -> None:
        self.output = output
        self.calls: list[tuple[str, int]] = []

    def __call__(self, tree: Tree, rel: str, limits: Limits, max_bytes: int) -> str:
        self.calls.append((rel, max_bytes))
        return self.output


@pytest.mark.parametrize("marker", ["kustomization.yaml", "kustomization.yml", "Kustomization"])
def test_a_kustomization_directory_is_rendered_whole(tmp_path: Path, marker: str) -> None:
    write(
        tmp_path,
        {
            f"app/{marker}": "resources: [deploy.yaml]\n",
            "app/deploy.yaml": "broken: [",  # rendered by the renderer, never walked
            "app/sub/x.yaml": "broken: [",
            "other.yaml": cm("other"),
        },
    )
    render = FakeRenderer(cm("a") + "---\n" + cm("b"))

    manifests = load(tmp_path, ["."], render_kustomization=render)

    assert render.calls == [("app", Limits().max_revision_bytes)]
    assert origins(manifests) == [
        "app/kustomization.yaml:1",
        "app/kustomization.yaml:7",
        "other.yaml:1",
    ]


def test_a_kustomization_at_the_root(tmp_path: Path) -> None:
    write(tmp_path, {"kustomization.yaml": "resources: []\n"})

    manifests = load(tmp_path, ["."], render_kustomization=FakeRenderer(cm("a")))

    assert origins(manifests) == ["kustomization.yaml:1"]


def test_rendered_output_errors_name_the_kustomization(tmp_path: Path) -> None:
    write(tmp_path, {"app/kustomization.yaml": "resources: []\n"})

    error = load_error(tmp_path, render_kustomization=FakeRenderer("a: 1\na: 2\n"))

    assert error.reason == "duplicate_key"
    assert str(error).startswith("app/kustomization.yaml:2:")


def test_a_kustomization_without_a_renderer_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, {"app/kustomization.yaml": "resources: []\n"})

    error = load_error(tmp_path)

    assert error.reason == "invalid"
    assert "app has a kustomization.yaml; rendering it needs kubectl on PATH" in str(error)


@pytest.mark.case("BI-07")
def test_bi07_the_renderer_gets_what_is_left_of_the_revision_limit(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("a"), "b/kustomization.yaml": "resources: []\n"})
    render = FakeRenderer(cm("b"))

    load(tmp_path, ["."], render_kustomization=render, limits=Limits(max_revision_bytes=1000))

    assert render.calls == [("b", 1000 - len(cm("a")))]


def test_rendered_output_counts_towards_the_revision_limit(tmp_path: Path) -> None:
    write(tmp_path, {"app/kustomization.yaml": "resources: []\n"})
    output = cm("a")

    error = load_error(
        tmp_path,
        render_kustomization=FakeRenderer(output),
        limits=Limits(max_revision_bytes=len(output) - 1),
    )

    assert error.reason == "size_limit"


# --- Parse cache -----------------------------------------------------------------------


def test_the_cache_reparses_only_the_changed_file(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("a"), "b.yaml": cm("b"), "c.yaml": cm("c")})
    cache = ParseCache()

    load(tmp_path, ["."], cache=cache)
    assert cache.parses == 3
    load(tmp_path, ["."], cache=cache)
    assert cache.parses == 3
    write(tmp_path, {"b.yaml": cm("b2")})
    manifests = load(tmp_path, ["."], cache=cache)

    assert cache.parses == 4
    assert names(manifests) == ["a", "b2", "c"]


class RecordingDirectory(Directory):
    """A directory read in place that remembers which files were read, and what it was
    told to expect."""

    def __init__(self, root: Path, blob_ids: dict[str, str]) -> None:
        super().__init__(root, blob_ids)
        self.reads: list[str] = []
        self.expected: list[str] = []

    def prefetch(self, rels: Iterable[str]) -> None:
        self.expected = list(rels)

    def read(self, rel: str, limit: int) -> bytes:
        self.reads.append(rel)
        return super().read(rel, limit)


def test_blob_ids_key_the_cache_without_reading_the_file(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("a"), "b.yaml": cm("b")})
    blob_ids = {"a.yaml": "1" * 40, "b.yaml": "2" * 40}
    cache = ParseCache()
    load(tmp_path, ["."], cache=cache, blob_ids=blob_ids)
    # Same size, same blob id, invalid bytes: a cache hit must neither read nor parse them.
    write(tmp_path, {"a.yaml": b"\xff" * len(cm("a"))})
    tree = RecordingDirectory(tmp_path, blob_ids)

    manifests = load(tree, ["."], cache=cache)

    assert names(manifests) == ["a", "b"]
    assert cache.parses == 2
    assert (tree.expected, tree.reads) == ([], [])
    tree = RecordingDirectory(tmp_path, {**blob_ids, "b.yaml": "3" * 40})
    load(tree, ["."], cache=cache)
    assert cache.parses == 3
    assert (tree.expected, tree.reads) == (["b.yaml"], ["b.yaml"])


def test_files_over_the_revision_limit_are_not_asked_for_ahead(tmp_path: Path) -> None:
    """A tree may fetch what it is told to expect in one go: never more than the limit."""
    write(tmp_path, {"a.yaml": cm("a"), "b.yaml": cm("b"), "c.yaml": cm("c")})
    tree = RecordingDirectory(tmp_path, {})
    limits = Limits(max_revision_bytes=len(cm("a")) + len(cm("b")))

    error = load_error(tree, limits=limits)

    assert str(error).startswith("c.yaml: the revision's manifests reach")
    assert tree.expected == tree.reads == ["a.yaml", "b.yaml"]


def test_size_limits_apply_to_cache_hits(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("a")})
    blob_ids = {"a.yaml": "1" * 40}
    cache = ParseCache()
    limits = Limits(max_revision_bytes=len(cm("a")) + 10)
    load(tmp_path, ["."], cache=cache, blob_ids=blob_ids, limits=limits)
    write(tmp_path, {"a.yaml": cm("a") + "#" * 20})  # pretend git still says the same blob

    error = load_error(tmp_path, cache=cache, blob_ids=blob_ids, limits=limits)

    assert error.reason == "size_limit"


def test_an_unchanged_file_yields_the_very_manifests_read_before(tmp_path: Path) -> None:
    """Nothing is parsed, validated or copied again: a revision costs work for what changed
    (which is why nothing may edit a manifest's body)."""
    write(tmp_path, {"a.yaml": cm("a", extra="data: {k: v}\n"), "b.yaml": cm("b")})
    blob_ids = {"a.yaml": "1" * 40, "b.yaml": "2" * 40}
    cache = ParseCache()

    first = load(tmp_path, ["."], cache=cache, blob_ids=blob_ids)
    write(tmp_path, {"b.yaml": cm("b2")})
    second = load(tmp_path, ["."], cache=cache, blob_ids={**blob_ids, "b.yaml": "3" * 40})

    assert cache.parses == 3
    assert second[0] is first[0]
    assert second[1] is not first[1] and names(second) == ["a", "b2"]


def test_identical_files_keep_their_own_origins(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("x"), "b.yaml": cm("x")})

    manifests = load(tmp_path, ["."], cache=ParseCache())

    assert origins(manifests) == ["a.yaml:1", "b.yaml:1"]
    assert manifests[0].body is not manifests[1].body


def test_other_limits_do_not_reuse_a_parse(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("a", extra="data: {k: {v: 1}}\n")})
    cache = ParseCache()
    load(tmp_path, ["."], cache=cache)

    error = load_error(tmp_path, cache=cache, limits=Limits(max_depth=2))

    assert error.reason == "depth_limit"


def test_the_cache_holds_only_the_revision_read_last(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": cm("a"), "b.yaml": cm("b"), "c.yaml": cm("c")})
    cache = ParseCache()
    load(tmp_path, ["."], cache=cache)
    write(tmp_path, {"b.yaml": cm("b2")})

    load(tmp_path, ["."], cache=cache)
    assert (len(cache), cache.parses) == (3, 4)

    write(tmp_path, {"b.yaml": cm("b")})  # back to the first revision's b: parsed again
    load(tmp_path, ["."], cache=cache)
    assert (len(cache), cache.parses) == (3, 5)


def test_a_file_that_vanishes_while_the_tree_is_read_is_an_error_never_a_skip(
    tmp_path: Path,
) -> None:
    """Half a tree must never become the desired set: prune would act on the other half."""
    write(tmp_path, {"k/kustomization.yaml": "resources: []\n", "z.yaml": cm("z")})

    def render_and_remove_a_later_file(tree: Tree, rel: str, limits: Limits, max_bytes: int) -> str:
        (tmp_path / "z.yaml").unlink()  # walked after k/, listed before it was removed
        return cm("a")

    with pytest.raises(SourceError) as caught:
        load(tmp_path, ["."], render_kustomization=render_and_remove_a_later_file)
    assert str(caught.value) == "z.yaml: vanished while the revision was read"
    assert caught.value.reason == "corrupt"


def test_a_missing_path_lists_the_first_names_of_a_big_directory(tmp_path: Path) -> None:
    root = write(tmp_path, {f"app{n:02}/cm.yaml": cm(f"a{n}") for n in range(25)})

    error = load_error(root, ("ap",))

    listed = ", ".join(f"app{n:02}" for n in range(20))
    assert str(error) == f"path ap not found in the revision; the root holds {listed} and 5 more"
