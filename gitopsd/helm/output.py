"""helm template's output, split into the templates it came from.

helm writes each document as `---`, then `# Source: CHART/PATH`, then the document; CHART is
the chart's name, which is not the directory it lies in. Consecutive documents of one
template are one piece, named by the template's path in the revision, so a manifest's origin
says which template wrote it (its line counts in that template's rendered output).
"""

from __future__ import annotations

import re

from gitopsd.manifests import child_path

_HEADER = re.compile(r"^---\n# Source: ([^\n]+)\n", re.MULTILINE)


def pieces(text: str, chart: str) -> list[tuple[str, str]]:
    """(template path, its rendered YAML) in the order helm wrote them; `chart` is the
    chart's root-relative directory. Anything before the first header is the chart's own."""
    headers = list(_HEADER.finditer(text))
    found = [(child_path(chart, "Chart.yaml"), text[: headers[0].start() if headers else None])]
    ends = [header.start() for header in headers[1:]] + [len(text)] * bool(headers)
    for header, end in zip(headers, ends, strict=True):
        path, body = _in_revision(header.group(1), chart), text[header.end() : end]
        if found[-1][0] == path:
            found[-1] = (path, f"{found[-1][1]}---\n{body}")
        else:
            found.append((path, body))
    return [(path, body) for path, body in found if body.strip()]


def _in_revision(source: str, chart: str) -> str:
    """`CHART/templates/x.yaml` as `<chart dir>/templates/x.yaml`."""
    _, _, inside = source.strip().partition("/")
    return child_path(chart, inside) if inside else child_path(chart, "Chart.yaml")
