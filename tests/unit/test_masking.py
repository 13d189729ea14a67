"""Secret values never leave unmasked: what a Secret shows, and every form of its values
that messages are redacted of. (Drift's masking, through `diff.compare`: test_diff.py.)"""

from __future__ import annotations

from typing import Any

from gitopsd.masking import MASK, MASK_CHANGED, mask, mask_pair, redact, secret_values


def config_map() -> dict[str, Any]:
    return {"kind": "ConfigMap", "data": {"a": "plain"}}


def test_a_secret_shows_a_mask_for_each_value_of_data_and_string_data() -> None:
    body = {"kind": "Secret", "data": {"a": "c2VjcmV0"}, "stringData": {"b": "secret"}}
    assert mask(body) == {"kind": "Secret", "data": {"a": MASK}, "stringData": {"b": MASK}}
    assert body["data"] == {"a": "c2VjcmV0"}  # the body itself is left alone


def test_values_git_wrote_as_no_mapping_are_masked_whole() -> None:
    body = {"kind": "Secret", "data": "c2VjcmV0", "stringData": ["secret"]}
    assert mask(body) == {"kind": "Secret", "data": MASK, "stringData": MASK}


def test_a_pair_is_masked_when_either_side_is_a_secret() -> None:
    secret = {"kind": "Secret", "data": {"a": "c2VjcmV0"}}
    assert mask_pair(secret, config_map())[0] == {"kind": "Secret", "data": {"a": MASK_CHANGED}}
    assert mask_pair(config_map(), secret)[1] == {"kind": "Secret", "data": {"a": MASK}}
    assert mask_pair(config_map(), config_map()) == (config_map(), config_map())


def test_each_value_of_every_secret_is_found_as_stored_and_decoded() -> None:
    bodies = [
        config_map(),  # not a Secret: its values are no secrets
        {"kind": "Secret", "data": {"a": "Q0FOQVJZ", "b": "b3RoZXI="}, "stringData": {"c": "key"}},
    ]
    assert secret_values(bodies) == {"Q0FOQVJZ", "CANARY", "b3RoZXI=", "b3RoZXI%3D", "other"} | {
        "key",
        "a2V5",
    }


def test_a_value_that_is_not_base64_is_taken_as_it_is() -> None:
    assert secret_values([{"kind": "Secret", "data": {"a": "Q0FO QVJZ"}}]) == {
        "Q0FO QVJZ",
        "Q0FO%20QVJZ",
    }


def test_values_under_three_characters_are_left_alone() -> None:
    """One or two characters would be redacted all over a message; three are redacted."""
    found = secret_values([{"kind": "Secret", "stringData": {"a": "ab", "b": "abc"}}])
    assert found == {"abc", "YWJj", "YWI=", "YWI%3D"}  # "ab" is longer base64-encoded


def test_a_value_is_found_as_json_escapes_it() -> None:
    found = secret_values([{"kind": "Secret", "stringData": {"a": 'say "hi"'}}])
    assert 'say \\"hi\\"' in found


def test_redact_replaces_the_longest_secret_first() -> None:
    """Else a secret that is part of a longer one would leave the rest of the longer one."""
    assert redact("token abxyzcd.", {"xyz", "abxyzcd"}) == f"token {MASK}."
