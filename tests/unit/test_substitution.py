"""Flux's post-build variables, pure: the text's syntax as Flux's envsubst reads it, and the
objects of a revision expanded, with their bounds and a Secret's values confined."""

from __future__ import annotations

import pytest

from gitopsd.config import Limits, SourceSpec, Substitution, VariablesFrom, target_of
from gitopsd.configfile.postbuild import substitution
from gitopsd.errors import ConfigError, ManifestError
from gitopsd.manifests.identity import manifests_of
from gitopsd.manifests.parsing import parse_documents
from gitopsd.objects import Manifest
from gitopsd.substitution import Variables, substituted
from gitopsd.substitution.expand import SubstitutionError, expand, used
from gitopsd.target_identity import Tool

VALUES = {"A": "hello", "EMPTY": "", "N": "3", "P": "a/b/c.txt"}


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("x ${A} y", "x hello y"),
        ("$A and $$A", "$A and $A"),  # only ${ opens one: a script's $VAR stays
        ("$${A}", "${A}"),
        ("cost: $$5", "cost: $5"),
        ("${UNSET}", ""),
        ("${EMPTY:-d} ${EMPTY-d} ${UNSET-d} ${UNSET:=d} ${EMPTY=d}", "d  d d "),
        ("${UNSET:-${A}-x}", "hello-x"),
        ("${A^} ${A^^} ${#A}", "Hello HELLO 5"),
        ("${A:1} ${A:1:2} ${A:-9}", "ello el hello"),
        ("${P#*/} ${P##*/} ${P%/*} ${P%%/*}", "b/c.txt c.txt a/b a"),
        ("${A/l/L} ${A//l/L} ${A/#h/H} ${A/%o/O}", "heLlo heLLo Hello hellO"),
    ],
)
def test_the_syntax_is_flux_envsubsts(text: str, expanded: str) -> None:
    assert expand(text, VALUES) == expanded


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("${", "no variable name"),
        ("${A", "bad substitution"),
        ("${A?x}", "bad substitution"),
        ("${-x}", "no variable name"),
        ("${A:x}", "an offset or length is a number"),
        ("${UNSET}", "variable UNSET has no value"),
    ],
)
def test_a_bad_substitution_or_strictly_a_variable_with_no_value_is_an_error(
    text: str, said: str
) -> None:
    with pytest.raises(SubstitutionError, match=said) as refused:
        expand(f"ok: {text}", VALUES, strict=True)

    assert refused.value.offset == 4
    assert expand("${UNSET:-d}", VALUES, strict=True) == "d"


def test_the_variables_a_text_names_include_those_of_defaults() -> None:
    assert used("${A} $B $${C} ${D:-${E}}") == {"A", "D", "E"}


def manifest(text: str, path: str = "app.yaml") -> Manifest:
    [found] = manifests_of(path, parse_documents(text, path, Limits()), deferred=True)
    return found


def variables(**values: str) -> Variables:
    return Variables(values, enabled=True)


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: "web-${CLUSTER}", annotations: {script: "echo $HOME $$5"}}
spec: {replicas: "${REPLICAS}"}
"""


def test_an_object_is_expanded_as_yaml_so_a_value_may_become_a_number_or_a_name() -> None:
    [expanded] = substituted(
        [manifest(DEPLOYMENT)], variables(CLUSTER="eu", REPLICAS="3"), Limits()
    )

    body = expanded.body
    assert (expanded.key.name, body["spec"]["replicas"]) == ("web-eu", 3)
    assert body["metadata"]["annotations"]["script"] == "echo $HOME $5"
    assert str(expanded.origin) == "app.yaml:1"


def test_nothing_is_expanded_without_a_postbuild_or_where_an_object_disables_it() -> None:
    config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%s}\ndata: {k: '${CLUSTER}'}\n"
    disabled = config % ", annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}"
    labelled = config % ", labels: {kustomize.toolkit.fluxcd.io/substitute: disabled}"
    plain = [manifest(DEPLOYMENT)]

    assert substituted(plain, Variables({"CLUSTER": "eu"}), Limits()) == plain  # not enabled
    for written in (disabled, labelled):
        [kept] = substituted([manifest(written)], variables(CLUSTER="eu"), Limits())
        assert kept.body["data"] == {"k": "${CLUSTER}"}
    as_written = DEPLOYMENT.replace(
        "script:", "kustomize.toolkit.fluxcd.io/substitute: disabled, script:"
    )
    with pytest.raises(ManifestError, match=r"as written: document 1: Deployment metadata\.name"):
        substituted([manifest(as_written)], variables(CLUSTER="eu"), Limits())


def test_strictly_a_missing_variable_names_the_file_line_and_object() -> None:
    strict = Variables({"CLUSTER": "eu"}, strict=True, enabled=True)
    with pytest.raises(ManifestError) as refused:
        substituted([manifest(DEPLOYMENT, "apps/web.yaml")], strict, Limits())

    assert str(refused.value) == (
        "apps/web.yaml:1: apps/Deployment/web-${CLUSTER}: variable substitution: "
        "variable REPLICAS has no value"
    )


def test_what_a_substitution_makes_is_checked_as_any_object_is() -> None:
    with pytest.raises(ManifestError, match=r"metadata\.name 'web-\$\{CLUSTER\}' must be"):
        manifests_of("app.yaml", parse_documents(DEPLOYMENT, "app.yaml", Limits()))
    bad_name = variables(CLUSTER="EU_1", REPLICAS="3")
    with pytest.raises(ManifestError, match=r"after substitution: .*web-EU_1"):
        substituted([manifest(DEPLOYMENT)], bad_name, Limits())
    big = variables(CLUSTER="eu", REPLICAS="3" * 5000)
    with pytest.raises(ManifestError, match=r"app\.yaml:1"):
        substituted([manifest(DEPLOYMENT)], big, Limits(max_object_bytes=4096))


SECRET = """apiVersion: v1
kind: Secret
metadata: {name: db}
stringData: {password: "${PASSWORD}"}
"""


def test_a_secrets_variable_may_be_used_only_in_secrets_data() -> None:
    secret = Variables({"PASSWORD": "hunter2-canary", "HOST": "db"}, frozenset({"PASSWORD"}))
    secret = Variables(secret.values, secret.secret, enabled=True)
    [kept] = substituted([manifest(SECRET)], secret, Limits())
    assert kept.body["stringData"] == {"password": "hunter2-canary"}

    leaks = [
        SECRET.replace("name: db", "name: db, annotations: {a: '${PASSWORD}'}"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {p: '${PASSWORD}'}\n",
    ]
    for text in leaks:
        with pytest.raises(ManifestError) as refused:
            substituted([manifest(text)], secret, Limits())
        assert "variable PASSWORD comes from a Secret" in str(refused.value)
        assert "hunter2" not in str(refused.value)


def test_the_variables_digest_changes_with_a_value_and_shows_none() -> None:
    first, second = variables(A="one-value"), variables(A="two-value")

    assert first.digest != second.digest and first.digest == variables(A="one-value").digest
    assert "one-value" not in first.digest


def test_a_postbuild_is_read_as_flux_writes_it_and_refused_with_its_key() -> None:
    read = substitution(
        {
            "substitute": {"CLUSTER": "eu"},
            "substituteFrom": [{"kind": "Secret", "name": "vars", "optional": True}],
            "strict": True,
        },
        "f.yaml: postBuild",
    )
    assert read == Substitution(
        (("CLUSTER", "eu"),), (VariablesFrom("Secret", "vars", optional=True),), strict=True
    )
    bad = [
        ({"substitute": {"1X": "v"}}, "is not a variable name"),
        ({"substitute": {"N": 3}}, 'quote numbers and booleans: N: "3"'),
        ({"substituteFrom": [{"kind": "Pod", "name": "x"}]}, "kind: ConfigMap or Secret"),
        ({"substituteFrom": [{"kind": "Secret"}]}, "substituteFrom\\[0\\]: name"),
        ({"subst": {}}, "subst"),
    ]
    for block, said in bad:
        with pytest.raises(ConfigError, match=said):
            substitution(block, "f.yaml: postBuild")


def test_one_base_synced_with_other_variables_is_another_target() -> None:
    spec = SourceSpec(url="https://git.example/repo.git")
    eu = SourceSpec(url=spec.url, substitution=Substitution((("CLUSTER", "eu"),)))
    us = SourceSpec(url=spec.url, substitution=Substitution((("CLUSTER", "us"),)))
    plain, first, second = (target_of(s, "apps", Tool.DAEMON) for s in (spec, eu, us))

    assert len({plain.digest(), first.digest(), second.digest()}) == 3
    assert "variables" not in plain.annotation()  # as before: earlier records keep their name
    assert '"variables":["strict","substitute.CLUSTER","substituteFrom"]' in first.annotation()
    assert "eu" not in first.annotation()
