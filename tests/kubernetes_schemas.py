"""Writes the built-in kinds' schemas that `gitopsd validate` ships (`make schemas`):

    python -m tests.kubernetes_schemas > gitopsd/validation/kubernetes.json

They come from the OpenAPI v3 spec the API server publishes (`api/openapi-spec/v3` of the
`k8s.io/kubernetes` Go module), at the version the test control plane is built from
(tests/controlplane/kube/go.mod). `go mod download` fetches the module into Go's module
cache (or finds it there); the spec is read from the module's zip, whose hash must be the
one go.sum pins. Kept: every kind a default API server of that version serves and that can
be applied (a PATCH on its objects), its scope, and the schemas it refers to, without
prose (descriptions) or defaults, which validation does not read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MODULE = "k8s.io/kubernetes"
WRAPPER = Path(__file__).resolve().parent / "controlplane" / "kube"
SPEC = "api/openapi-spec/v3/"
UNSERVED = re.compile(r"__v[0-9]+(alpha|beta)[0-9]+_openapi\.json$")
"""Alpha and beta versions are off by default (KEP-3136; in v1.34 every beta in the spec is
listed in pkg/controlplane/instance.go's betaAPIGroupVersionsDisabledByDefault)."""
GROUP_VERSION = re.compile(r"^apis?__(?:(?P<group>[^_]+)__)?(?P<version>v[0-9]+)_openapi\.json$")
DROPPED = frozenset({"description", "default"})
REF = "#/components/schemas/"


def main() -> None:
    zip_path, version, module_sum = download()
    with zipfile.ZipFile(zip_path) as module:
        check_sum(module, module_sum)
        documents = dict(spec_documents(module, f"{MODULE}@{version}/{SPEC}"))
    kinds, schemas = {}, {}
    for api_version, document in sorted(documents.items()):
        found = kinds_of(document)
        if found:
            kinds[api_version] = found
            schemas.update(document["components"]["schemas"])
    names = {kind["schema"] for served in kinds.values() for kind in served.values()}
    shipped = {
        "kubernetes": version,
        "module": {"path": MODULE, "version": version, "sum": module_sum, "spec": SPEC},
        "kinds": kinds,
        "components": {
            "schemas": {name: without_prose(schemas[name]) for name in reachable(schemas, names)}
        },
    }
    json.dump(shipped, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


def download() -> tuple[Path, str, str]:
    """The module's zip, version and go.sum hash, as `go mod download` checked them."""
    environment = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    done = subprocess.run(
        ["go", "mod", "download", "-json", MODULE],
        cwd=WRAPPER,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    pinned = pinned_sum(found["Version"])
    if found["Sum"] != pinned:
        raise SystemExit(f"{MODULE} {found['Version']}: {found['Sum']}, go.sum pins {pinned}")
    return Path(found["Zip"]), found["Version"], pinned


def pinned_sum(version: str) -> str:
    for line in (WRAPPER / "go.sum").read_text().splitlines():
        path, pinned_version, module_sum = line.split()
        if (path, pinned_version) == (MODULE, version):
            return module_sum
    raise SystemExit(f"go.sum pins no {MODULE} {version}")


def check_sum(module: zipfile.ZipFile, pinned: str) -> None:
    """The zip read is the one go.sum pins: Go's h1 hash (dirhash.Hash1) of its files."""
    summary = hashlib.sha256()
    for name in sorted(module.namelist()):
        summary.update(f"{hashlib.sha256(module.read(name)).hexdigest()}  {name}\n".encode())
    found = "h1:" + base64.b64encode(summary.digest()).decode()
    if found != pinned:
        raise SystemExit(f"{module.filename}: hash {found}, go.sum pins {pinned}")


def spec_documents(module: zipfile.ZipFile, folder: str) -> Iterator[tuple[str, Any]]:
    """(apiVersion, its OpenAPI document) of each group-version served by default."""
    for name in module.namelist():
        leaf = name.removeprefix(folder)
        match = GROUP_VERSION.match(leaf) if name.startswith(folder) else None
        if match and not UNSERVED.search(leaf):
            group, version = match["group"], match["version"]
            yield (f"{group}/{version}" if group else version), json.loads(module.read(name))


def kinds_of(document: Any) -> dict[str, dict[str, Any]]:
    """{kind: {schema, namespaced}} of every kind whose objects the document's paths patch."""
    kinds = {}
    for path, item in document["paths"].items():
        patch = item.get("patch") or {}
        gvk = patch.get("x-kubernetes-group-version-kind")
        if gvk and not re.search(r"\{name\}/", path):
            schema = schema_of(document["components"]["schemas"], gvk)
            kinds[gvk["kind"]] = {"schema": schema, "namespaced": "{namespace}" in path}
    return kinds


def schema_of(schemas: dict[str, Any], gvk: dict[str, str]) -> str:
    for name, schema in schemas.items():
        if gvk in schema.get("x-kubernetes-group-version-kind", []):
            return name
    raise SystemExit(f"no schema declares {gvk}")


def reachable(schemas: dict[str, Any], roots: set[str]) -> list[str]:
    """The schemas `roots` name and every one they refer to, in name order."""
    seen: set[str] = set()
    todo = sorted(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(referred(schemas[name]))
    return sorted(seen)


def referred(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref.removeprefix(REF)
        for value in node.values():
            yield from referred(value)
    elif isinstance(node, list):
        for value in node:
            yield from referred(value)


def without_prose(node: Any) -> Any:
    """The schema without the keywords DROPPED; a property of such a name stays."""
    if isinstance(node, list):
        return [without_prose(value) for value in node]
    if not isinstance(node, dict):
        return node
    kept = {key: without_prose(value) for key, value in node.items() if key not in DROPPED}
    if isinstance(node.get("properties"), dict):
        kept["properties"] = {name: without_prose(s) for name, s in node["properties"].items()}
    return kept


if __name__ == "__main__":
    main()
