"""kustomize's errors keep their cause and lose every generator value (SE-02)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsd.sandbox import cause, scrub

ROOT = Path("/cache/checkout")

# Shapes kubectl 1.34 (kustomize v5.7) and helm 4.3 print, reproduced with the real binaries.
CAUSES = {
    "one error line": (
        "error: configmap s illegally repeats the key `a`\n",
        "error: configmap s illegally repeats the key `a`",
    ),
    "a quoted config is left out, the cause kept": (
        "error: trouble configuring builtin PatchTransformer with config: `\n"
        "path: missing.yaml\n"
        "`: failed to get the patch file from path(missing.yaml): no such file or directory\n",
        "error: trouble configuring builtin PatchTransformer with config: `...`: failed to get"
        " the patch file from path(missing.yaml): no such file or directory",
    ),
    "warnings before the error": ("# Warning: x\nerror: bad\n", "error: bad"),
    "no error line": ("first\nlast words\n", "last words"),
    "nothing at all": ("", "no message"),
    "helm's hint to run it with --debug left out (helm 4.3)": (
        "Error: YAML parse error on hc/templates/x.yaml: error converting YAML to JSON: yaml: "
        "mapping values are not allowed in this context\n\n"
        "Use --debug flag to render out invalid YAML\n",
        "Error: YAML parse error on hc/templates/x.yaml: error converting YAML to JSON: yaml: "
        "mapping values are not allowed in this context",
    ),
}


@pytest.mark.parametrize(("stderr", "expected"), CAUSES.values(), ids=CAUSES)
def test_the_cause_is_kustomizes_error(stderr: str, expected: str) -> None:
    assert cause(stderr) == expected


SCRUBBED = {
    "SE-02 an env line": (
        "line [84 61 67 255] has invalid utf8 bytes : TOKEN=s3cr3t-value",
        [],
        "line [***] has invalid utf8 bytes : TOKEN=***",
    ),
    "SE-02 a literal without a key": (
        "literal sources [a b=one =two]: invalid literal source =two",
        [],
        "literal sources [a b=*** =***]: invalid literal source =***",
    ),
    "SE-02 a generator value anywhere": (
        "invalid literal source s3cr3t, or czNjcjN0",
        ["s3cr3t"],
        "invalid literal source ***, or ***",
    ),
    "short values are left alone": ("key a, value 1", ["1"], "key a, value 1"),
    "paths are relative to the checkout": (
        f"lstat {ROOT}/app/x.yaml: no such file; in {ROOT}",
        [],
        "lstat app/x.yaml: no such file; in .",
    ),
}


@pytest.mark.parametrize(("text", "secrets", "expected"), SCRUBBED.values(), ids=SCRUBBED)
def test_scrub(text: str, secrets: list[str], expected: str) -> None:
    assert scrub(text, secrets, ROOT) == expected
