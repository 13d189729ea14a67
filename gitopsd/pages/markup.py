"""The status page's HTML building blocks, pure: every string cut to a bound and escaped,
tables and their "and N more", the one style sheet (allowed by its hash: no inline style
or script runs), and the document around a page, refreshing itself."""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Iterable, Sequence

MAX_TEXT = 200
"""Characters of any one value shown; the rest is cut, and said to be."""
ELLIPSIS = "…"
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d1d1f; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #d0d0d7; padding: 0.25em 0.6em; text-align: left;
  vertical-align: top; overflow-wrap: anywhere; max-width: 40em; }
th { background: #f2f2f6; }
code { font: 12px/1.4 ui-monospace, monospace; }
.good { color: #116329; } .bad { color: #b3261e; font-weight: 600; } .muted { color: #6e6e73; }
.more { color: #6e6e73; font-style: italic; }
"""
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"style-src 'sha256-{base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()}'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""Nothing but this page's own style sheet may load or run: no script, no image, no frame."""


def text(value: object, limit: int = MAX_TEXT) -> str:
    """`value` as HTML text (a string as it is, anything else as JSON), cut to `limit`
    characters before it is escaped, so no cut falls inside an entity."""
    shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if len(shown) > limit:
        shown = f"{shown[:limit]}{ELLIPSIS} ({len(shown)} characters)"
    return html.escape(shown)


def code(value: object) -> str:
    return f"<code>{text(value)}</code>"


def link(href: str, label: object) -> str:
    """A link to one of the page's own paths (`href` is quoted already, and escaped here)."""
    return f'<a href="{html.escape(href)}">{text(label)}</a>'


def marked(word: str, good: Iterable[str], bad: Iterable[str]) -> str:
    """A status word, coloured by whether it is good news, bad news or neither."""
    tone = "good" if word in good else "bad" if word in bad else "muted"
    return f'<span class="{tone}">{text(word)}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of cells already made HTML (each built with `text` or the helpers above);
    no headers: no header row."""
    head = "".join(f"<th>{html.escape(header)}</th>" for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    thead = f"<thead><tr>{head}</tr></thead>" if head else ""
    return f"<table>{thead}<tbody>{body}</tbody></table>"


def more(hidden: int, what: str) -> str:
    """What a bound left out, counted."""
    return f'<p class="more">and {hidden} more {html.escape(what)}</p>' if hidden > 0 else ""


def document(title: str, body: str, refresh_seconds: float) -> str:
    """A whole page, reloading itself every `refresh_seconds` with no script at all."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="{max(1, round(refresh_seconds))}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{text(title)}</title><style>{STYLE}</style></head>"
        f"<body>{body}</body></html>"
    )
