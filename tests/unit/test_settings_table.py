"""Each setting is defined once, in gitopsd.settings_table, and every place it is set agrees
with its row: the frozen settings take its default, its flag and its key (and a GitSync's
spec, where it has it) set its field to the same value, the remedies name it as each place
does, and the docs list its flag with its default and its key."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitopsd import config, configfile
from gitopsd.cli.completion import program
from gitopsd.cli.parser import build_parser
from gitopsd.cli.settings import source_spec, sync_settings
from gitopsd.config import Credentials, Setting, words
from gitopsd.configfile import GitSyncSettings, SourceConfig
from gitopsd.configfile.sources import SOURCE_KEYS
from gitopsd.gitsync import schema, spec
from gitopsd.settings_table import TABLE, VERIFY_MODE, Holder, Kind, Row, rows, shown
from gitopsd.target_identity import Tool

ROOT = Path(__file__).resolve().parents[2]
URL = "https://git.example.com/team/apps.git"
EXAMPLES: dict[Kind, tuple[list[str], Any, Any]] = {
    Kind.DURATION: (["90s"], "90s", 90.0),
    Kind.SECONDS: (["90"], 90, 90.0),
    Kind.PERCENT: (["50"], 50, 50.0),
    Kind.POSITIVE: (["7"], 7, 7),
    Kind.SIZE: (["7Ki"], "7Ki", 7 * 1024),
    Kind.COUNT: (["2Ki"], "2Ki", 2048),
    Kind.TEXT: (["other"], "other", "other"),
    Kind.FILE: (["/etc/other"], "/etc/other", Path("/etc/other")),
    Kind.PATHS: (["a", "b"], ["a", "b"], ("a", "b")),
    Kind.GLOBS: (["*.x", "*.y"], ["*.x", "*.y"], ("*.x", "*.y")),
}
"""A value of each kind other than any row's default: as flags take it, as a file or a
GitSync writes it, and as it is read."""
NEEDED: dict[Row, tuple[list[str], dict[str, Any], dict[str, Any]]] = {
    VERIFY_MODE: (
        ["--verify-public-keys", "/etc/keys"],
        {"verify": {"publicKeysFile": "/etc/keys"}},
        {"verify": {"secretRef": {"name": "keys"}}},
    ),
}
"""What a row is read only beside, given or not, as flags, a file's keys and a GitSync's
spec: a verify mode verifies with keys (a file's are checked where its list is read)."""


def example(row: Row) -> tuple[list[str], Any, Any]:
    if row.kind is Kind.SWITCH:
        return [], not row.default, not row.default
    if row.kind is Kind.CHOICE:
        other = next(word for word in type(row.default) if word != row.default)
        return [str(other)], str(other), other
    return EXAMPLES[row.kind]


def settings_of(row: Row, source: SourceConfig) -> dict[str, Any]:
    """The fields of `source` that the rows of `row`'s holder set."""
    holders = {
        Holder.SOURCE_SPEC: source.spec,
        Holder.CREDENTIALS: source.spec.credentials,
        Holder.VERIFICATION: source.spec.verify,
        Holder.DECRYPTION: source.spec.decryption,
        Holder.LIMITS: source.spec.limits,
        Holder.PRUNE_POLICY: source.settings.prune,
        Holder.SYNC_SETTINGS: source.settings,
        Holder.SOURCE_CONFIG: source,
    }
    return {other.field: getattr(holders[row.holder], other.field) for other in rows(row.holder)}


def nested(row: Row, given: bool, beside: dict[str, Any]) -> dict[str, Any]:
    """The row's example at its key, in its block if it has one (or nothing), with what
    it is read `beside`."""
    if not given:
        return beside
    value = example(row)[1]
    if not row.block:
        return {**beside, row.name: value}
    return {**beside, row.block: {**beside.get(row.block, {}), row.name: value}}


def by_flag(row: Row, given: bool) -> SourceConfig:
    assert row.flag
    values = example(row)[0] if given else []
    flags = [part for value in values for part in (row.flag.name, value)]
    switched = [row.flag.name] if given and not values else []
    needed = NEEDED.get(row, ([], {}, {}))[0]
    arguments = build_parser().parse_args(["sync", URL, *needed, *flags, *switched])
    read_spec = source_spec(arguments)
    return SourceConfig("app", read_spec, sync_settings(arguments, read_spec))


def by_key(row: Row, given: bool) -> SourceConfig:
    beside = NEEDED.get(row, ([], {}, {}))[1]
    return configfile.source(
        {"name": "app", "repository": URL, **nested(row, given, beside)}, "here"
    )


def by_spec(row: Row, given: bool) -> SourceConfig:
    beside = NEEDED.get(row, ([], {}, {}))[2]
    body = {
        "metadata": {"namespace": "team", "name": "app"},
        "spec": {"repository": {"url": URL}, **nested(row, given, beside)},
    }
    return spec.read(body, GitSyncSettings()).source(Credentials(password_env=None))


PLACES = [
    *[pytest.param(by_flag, row, id=f"flag-{row.dest}") for row in TABLE if row.flag],
    *[pytest.param(by_key, row, id=f"key-{row.key}") for row in TABLE if row.key],
    *[pytest.param(by_spec, row, id=f"spec-{row.key}") for row in TABLE if row.gitsync],
]
"""Each place a row is set in: its flag, its key in a file source, a GitSync's spec."""


@pytest.mark.parametrize("row", TABLE, ids=lambda row: row.field)
def test_the_frozen_settings_take_each_default_from_its_row(row: Row) -> None:
    holder = getattr(config, row.holder.value, None) or getattr(configfile, row.holder.value)
    fields = {field.name: field for field in dataclasses.fields(holder)}

    assert fields[row.field].default == row.default
    assert example(row)[2] != row.default


@pytest.mark.parametrize(("read", "row"), PLACES)
def test_each_place_sets_its_rows_field_and_no_other(
    read: Callable[[Row, bool], SourceConfig], row: Row
) -> None:
    left_out = settings_of(row, read(row, False))
    given = settings_of(row, read(row, True))

    assert left_out[row.field] == row.default
    assert given == left_out | {row.field: example(row)[2]}


def test_the_crds_spec_has_the_rows_a_gitsync_sets_and_no_other() -> None:
    [version] = schema.crd()["spec"]["versions"]
    properties = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]

    def has(row: Row) -> bool:
        inside = properties[row.block]["properties"] if row.block in properties else properties
        return row.name in inside

    assert [row.key for row in TABLE if row.key and has(row)] == [
        row.key for row in TABLE if row.gitsync
    ]


def sync_flags() -> set[str]:
    [sync] = [command for command in program(build_parser()).commands if command.name == "sync"]
    return {name for flag in sync.flags for name in flag.names}


@pytest.mark.parametrize("tool", list(Tool))
@pytest.mark.parametrize("setting", list(Setting))
def test_a_remedy_names_each_setting_as_the_place_it_is_set_in(
    setting: Setting, tool: Tool
) -> None:
    said = words(setting, tool)

    if tool is Tool.CLI:
        assert said.split()[0] in sync_flags()
    elif tool is Tool.DAEMON:
        assert said.removesuffix(": true").partition(".")[0] in SOURCE_KEYS
    else:
        assert said.startswith(("spec.", "metadata.name", "the GitSync's namespace"))


def documented_defaults() -> dict[str, str]:
    """Each flag of docs/cli.md's table of flags, and its default as the table writes it."""
    text = (ROOT / "docs" / "cli.md").read_text()
    table = text.partition("## Configuration\n")[2].partition("\n\n")[0]
    cells = [line.split(" | ") for line in table.splitlines() if line.startswith("| `--")]
    return {flag: cell[1] for cell in cells for flag in re.findall(r"`(--[\w-]+)`", cell[0])}


def as_documented(row: Row) -> str:
    """The row's default as docs/cli.md writes it: off or on, none, a number as it is, the
    rest as code."""
    if row.kind is Kind.SWITCH:
        return "on" if row.default else "off"
    if row.default in (None, ()):
        return "none"
    if row.kind in (Kind.COUNT, Kind.POSITIVE, Kind.PERCENT, Kind.SECONDS):
        return shown(row)
    items = row.default if isinstance(row.default, tuple) else (shown(row),)
    return ", ".join(f"`{item}`" for item in items)


@pytest.mark.parametrize("row", [row for row in TABLE if row.flag], ids=lambda row: row.field)
def test_the_cli_docs_list_each_flag_with_its_default(row: Row) -> None:
    assert row.flag
    documented = documented_defaults().get(row.flag.name)

    assert documented is not None, f"docs/cli.md, Configuration, has no {row.flag.name}"
    assert f"{documented} ".startswith(f"{as_documented(row)} ")


@pytest.mark.parametrize("row", [row for row in TABLE if row.key], ids=lambda row: row.field)
def test_the_annotated_configuration_names_each_key(row: Row) -> None:
    example = (ROOT / "config" / "gitopsd.yaml").read_text()

    assert re.search(rf"\b{row.name}:", example), f"config/gitopsd.yaml names no {row.key}"
    assert not row.block or re.search(rf"\b{row.block}:", example)
