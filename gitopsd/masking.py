"""Secret values never leave gitopsd unmasked: drift shows *** for each value (and
"*** (changed)" for one git changes), and messages have every form of a value redacted.
Pure."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterable
from urllib.parse import quote

from gitopsd.objects import Body

MASK, MASK_CHANGED = "***", "*** (changed)"


def mask(body: Body) -> Body:
    """A Secret with every value of its data and stringData replaced by ***, so which keys
    it sets still shows (a field git wrote as no mapping is masked whole); other kinds
    unchanged."""
    if body.get("kind") != "Secret":
        return body
    masked = copy.deepcopy(body)
    for values in ("data", "stringData"):
        if values in masked:
            found = masked[values]
            masked[values] = dict.fromkeys(found, MASK) if isinstance(found, dict) else MASK
    return masked


def mask_pair(want: Body, have: Body) -> tuple[Body, Body]:
    """Masks both sides of a Secret; a changed value shows as '*** (changed)' in git's side."""
    if want.get("kind") != "Secret" and have.get("kind") != "Secret":
        return want, have
    wanted, had = want.get("data") or {}, have.get("data") or {}
    masked_want, masked_have = mask(want), mask(have)
    if "data" in masked_want:
        masked_want["data"] = {
            k: MASK if had.get(k) == v else MASK_CHANGED for k, v in wanted.items()
        }
    return masked_want, masked_have


def secret_values(bodies: Iterable[Body]) -> set[str]:
    """Each form a Secret value takes in text: raw, base64, decoded, JSON-escaped, URL-encoded."""
    values: set[str] = set()
    for body in bodies:
        if body.get("kind") != "Secret":
            continue
        for value in (body.get("data") or {}).values():
            values |= {str(value), _decoded(str(value))}
        for value in (body.get("stringData") or {}).values():
            values |= {str(value), base64.b64encode(str(value).encode()).decode()}
    forms = {form for value in values if len(value) >= 3 for form in _forms(value)}
    return forms


def _decoded(value: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode()
    except ValueError:
        return value


def _forms(value: str) -> set[str]:
    return {value, json.dumps(value)[1:-1], quote(value, safe="")}


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret form replaced by ***, longest first."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
