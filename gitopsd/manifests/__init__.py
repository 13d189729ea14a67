"""From a revision's files to validated, identified manifests.

`load` reads a `Tree` (`tree`): a directory in place, or a git revision that gitopsd.source
reads from its object store. It walks the configured paths in a stable order without ever
following a symlink (`selection`), admits each file under the revision's byte limit and
takes the manifests of a file the parse cache knows by blob id as they were (`reading`,
`cache`); any other file it decodes as strict UTF-8 and parses with a hardened YAML loader
(or `json`), which bounds each object's size (`parsing`, `yaml_budget`,
`yaml_loader`). Every document then becomes a
`Manifest` once its identity (by Kubernetes' naming rules) and labels are valid; `index`
keys the manifests by object and rejects duplicates (`identity`). `positions` finds the
line of a field in its file again, for a message about it.

Hostile input is the normal case here (the catalogue's BI cases, docs/reliability.md):
every limit is checked before the work it bounds, and no error message echoes file content
beyond key names, so a Secret's value can never leak through one.

This package reads files; it never runs a program and never talks to the network.
Kustomizations and charts are rendered through functions the caller passes in.
"""

from gitopsd.manifests.cache import ParseCache
from gitopsd.manifests.identity import index
from gitopsd.manifests.parsing import parse_documents, parse_file
from gitopsd.manifests.positions import Positions
from gitopsd.manifests.reading import ChartRender, Render, RenderChart, load
from gitopsd.manifests.selection import (
    CHART_FILE,
    DEFAULT_INCLUDE,
    KUSTOMIZATION_FILES,
    child_path,
)
from gitopsd.manifests.tree import Directory, Tree, copy_paths
from gitopsd.manifests.yaml_loader import Documents

__all__ = [
    "CHART_FILE",
    "DEFAULT_INCLUDE",
    "KUSTOMIZATION_FILES",
    "ChartRender",
    "Directory",
    "Documents",
    "ParseCache",
    "Positions",
    "Render",
    "RenderChart",
    "Tree",
    "child_path",
    "copy_paths",
    "index",
    "load",
    "parse_documents",
    "parse_file",
]
