"""The daemon's read-only status page as HTML, pure: `overview` (every source) and
`source_page` (one source's drift and history), from plain data (`views`) the daemon
gathers; `markup` escapes and bounds every string, and says what the page may load."""

from gitopsd.pages.markup import CONTENT_SECURITY_POLICY, MAX_TEXT
from gitopsd.pages.overview import overview
from gitopsd.pages.source import source_page
from gitopsd.pages.views import SOURCES_PATH, SourceDetail, SourceLine

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "MAX_TEXT",
    "SOURCES_PATH",
    "SourceDetail",
    "SourceLine",
    "overview",
    "source_page",
]
