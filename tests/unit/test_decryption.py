"""What a file is to SOPS (gitopsd.decryption.formats) and the keys a source decrypts with
(gitopsd.decryption.keys), pure: the files here are written in sops's formats by hand; the
integration tests (test_sops.py) decrypt what sops itself encrypted."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from gitopsd.config import Decryption
from gitopsd.decryption import keys_of
from gitopsd.decryption.formats import Format, encrypted, encrypted_values, format_of
from gitopsd.errors import ConfigError

SEALED = "ENC[AES256_GCM,data:bm90IHRoZSB2YWx1ZQ==,iv:AAAA,tag:BBBB,type:str]"
AGE_METADATA = """sops:
    age:
        - recipient: age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p
          enc: |
            -----BEGIN AGE ENCRYPTED FILE-----
            YWdl
            -----END AGE ENCRYPTED FILE-----
    lastmodified: "2026-12-05T10:00:00Z"
    mac: ENC[AES256_GCM,data:bWFj,iv:AAAA,tag:BBBB,type:str]
    encrypted_regex: ^(data|stringData)$
    version: 3.13.2
"""
SECRET = f"""apiVersion: v1
kind: Secret
metadata:
    name: database
stringData:
    password: {SEALED}
{AGE_METADATA}"""


def test_the_format_is_sops_own_choice_by_extension() -> None:
    assert format_of("a/secret.yaml") is Format.YAML
    assert format_of("a/secret.YML") is Format.YAML
    assert format_of("values.json") is Format.JSON
    assert format_of("app.env") is Format.DOTENV
    assert format_of("app.ini") is Format.INI
    assert format_of("tls.crt") is Format.BINARY
    assert format_of("noextension") is Format.BINARY


def test_a_yaml_file_with_sops_metadata_is_encrypted_for_its_kinds_of_keys() -> None:
    found = encrypted("secret.yaml", SECRET.encode())
    assert found is not None
    assert found.format is Format.YAML and found.kinds == {"age"} and found.usable


def test_a_file_for_a_cloud_kms_only_is_not_usable_and_named_so() -> None:
    kms = AGE_METADATA.replace("    age:", "    kms:").replace("recipient:", "arn:")
    both = kms.replace("    mac:", "    gcp_kms:\n        - resource_id: r\n    mac:")
    found = encrypted("secret.yaml", f"stringData:\n    a: {SEALED}\n{both}".encode())
    assert found is not None and not found.usable
    assert found.named_kinds == "AWS KMS, GCP KMS"


def test_keys_of_key_groups_count() -> None:
    groups = "sops:\n    key_groups:\n        - pgp:\n            - fp: ABCD\n    mac: m\n"
    found = encrypted("s.yaml", f"data:\n    a: {SEALED}\n{groups}".encode())
    assert found is not None and found.kinds == {"pgp"}


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n",
        "kind: ConfigMap\nsops: {mac: x}\n",  # not sops's own block: the Secret check says
        "kind: ConfigMap\ndata:\n  script: |\n    sops:\n      mac: x\n",
        "sops:\n  - not a mapping\n",
    ],
    ids=["plain", "inline", "in-a-block-scalar", "a-list"],
)
def test_a_yaml_file_without_sops_metadata_of_its_own_is_plain(text: str) -> None:
    assert encrypted("file.yaml", text.encode()) is None


def test_a_multi_document_file_is_encrypted_when_a_document_carries_metadata() -> None:
    text = f"kind: ConfigMap\n---\n{SECRET}"
    found = encrypted("both.yaml", text.encode())
    assert found is not None and found.kinds == {"age"}


def test_json_and_binary_files_carry_metadata_under_a_top_level_sops_key() -> None:
    metadata = '"sops": {"age": [{"recipient": "age1x", "enc": "e"}], "mac": "m"}'
    json_file = f'{{"stringData": {{"a": "{SEALED}"}}, {metadata}}}'.encode()
    binary = f'{{"data": "{SEALED}", {metadata}}}'.encode()
    found = encrypted("secret.json", json_file)
    assert found is not None and found.format is Format.JSON and found.kinds == {"age"}
    found = encrypted("tls.crt", binary)
    assert found is not None and found.format is Format.BINARY
    assert encrypted("tls.crt", json_file) is None  # sops's binary files keep `data`
    assert encrypted("tls.crt", b"\x00\x01-----BEGIN CERTIFICATE-----") is None
    assert encrypted("deep.json", b'{"sops": ' + b"[" * 100_000) is None


def test_dotenv_and_ini_files_carry_flattened_metadata() -> None:
    dotenv = (
        f"PASSWORD={SEALED}\nHOST=db\nsops_age__list_0__map_recipient=age1x\n"
        "sops_pgp__list_0__map_fp=ABCD\nsops_mac=m\nsops_version=3.13.2\n"
    )
    found = encrypted("app.env", dotenv.encode())
    assert found is not None and found.format is Format.DOTENV
    assert found.kinds == {"age", "pgp"}
    ini = f"[db]\npassword = {SEALED}\n[sops]\nkms__list_0__map_arn = arn\nmac = m\n"
    found = encrypted("app.ini", ini.encode())
    assert found is not None and found.kinds == {"kms"} and not found.usable
    assert encrypted("app.env", b"PASSWORD=plain\n") is None


def test_the_values_shown_never_are_those_sops_encrypted_not_those_it_left_clear() -> None:
    plain = SECRET.replace(SEALED, "s3cret-password").split("sops:")[0]
    found = encrypted("secret.yaml", SECRET.encode())
    assert found is not None
    values = list(encrypted_values("secret.yaml", found, SECRET.encode(), plain.encode()))
    assert values == ["s3cret-password"]


def test_typed_values_and_lists_are_walked_with_the_ciphertext() -> None:
    cipher = f"data:\n    port: {SEALED}\n    hosts:\n    - {SEALED}\n    - clear\n{AGE_METADATA}"
    plain = "data:\n    port: 5432\n    hosts: [db.internal, clear]\n"
    found = encrypted("values.yaml", cipher.encode())
    assert found is not None
    assert list(encrypted_values("values.yaml", found, cipher.encode(), plain.encode())) == [
        "5432",
        "db.internal",
    ]


def test_a_dotenv_file_shows_its_encrypted_keys_values_and_a_binary_file_is_one_value() -> None:
    cipher = f"PASSWORD={SEALED}\nHOST=db\nsops_mac=m\n".encode()
    found = encrypted("app.env", cipher)
    assert found is not None
    plain = b"PASSWORD=hunter2-long\nHOST=db\n"
    assert list(encrypted_values("app.env", found, cipher, plain)) == ["hunter2-long"]
    binary = encrypted("tls.key", f'{{"data": "{SEALED}", "sops": {{"mac": "m"}}}}'.encode())
    assert binary is not None
    assert list(encrypted_values("tls.key", binary, b"", b"-----BEGIN KEY")) == ["-----BEGIN KEY"]


AGE_IDENTITY = (
    b"# created: 2026-12-05T10:00:00Z\n# public key: age1x\n"
    b"AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ\n"
)
PACKETS = bytes(range(256)) * 3


def armored(packets: bytes, headers: str = "") -> bytes:
    body = base64.b64encode(packets).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return (
        f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n{headers}\n{lines}\n=ABCD\n"
        "-----END PGP PRIVATE KEY BLOCK-----\n"
    ).encode()


def test_keys_are_read_from_their_files_and_openpgp_keys_dearmored(tmp_path: Path) -> None:
    (tmp_path / "age.txt").write_bytes(AGE_IDENTITY)
    (tmp_path / "keys.asc").write_bytes(armored(PACKETS) + armored(b"second", "Comment: x\n"))
    keys = keys_of(Decryption(tmp_path / "age.txt", tmp_path / "keys.asc"))
    assert keys is not None
    assert keys.age == AGE_IDENTITY and keys.keyring == PACKETS + b"second"
    assert keys_of(Decryption()) is None
    only_age = keys_of(Decryption(age_key_file=tmp_path / "age.txt"))
    assert only_age is not None and only_age.digest != keys.digest
    assert "AGE-SECRET" not in repr(keys) and "AGE-SECRET" not in keys.digest


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("age.txt", b"age1notanidentity\n", "holds no age identity"),
        ("keys.asc", b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n", "no armored OpenPGP private"),
        ("keys.asc", armored(b"x").replace(b"\n=ABCD", b"\n!!!!\n=ABCD"), "is not base64"),
        ("keys.asc", b"x" * (1024 * 1024 + 1), "over 1048576 bytes"),
    ],
    ids=["age-recipient", "public-key", "bad-armor", "too-big"],
)
def test_a_key_file_that_holds_no_key_is_refused_naming_it(
    tmp_path: Path, name: str, content: bytes, error: str
) -> None:
    (tmp_path / name).write_bytes(content)
    field = "age_key_file" if name == "age.txt" else "pgp_key_file"
    with pytest.raises(ConfigError, match=error) as raised:
        keys_of(Decryption(**{field: tmp_path / name}))
    assert str(tmp_path / name) in str(raised.value)
    with pytest.raises(ConfigError, match="cannot be read"):
        keys_of(Decryption(**{field: tmp_path / "missing"}))
