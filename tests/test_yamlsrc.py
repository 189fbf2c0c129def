"""Strict YAML 1.2 with positions: the parser under every spec and rule file."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import InputError
from engine.yamlsrc import LocDict, decode_source, load_yaml_file, parse_yaml


def test_yaml_is_1_2_on_and_yes_stay_strings() -> None:
    doc = parse_yaml("on: yes\nno: off\nflag: true\nn: 010\nz: ~\n", "r.yml")
    # `010` is a string in YAML 1.2 as serde_yaml (the reference) resolves it (issue 13, item 11)
    assert doc.data == {"on": "yes", "no": "off", "flag": True, "n": "010", "z": None}


def test_yaml_positions_are_one_based_for_keys_and_items() -> None:
    doc = parse_yaml("a: 1\nlist:\n  - x\n  - y\n", "r.yml")
    data = doc.data
    assert isinstance(data, LocDict)
    assert (data.where("list").line, data.where("list").col) == (2, 1)
    assert (data["list"].where(1).line, data["list"].where(1).col) == (4, 5)


@pytest.mark.parametrize(
    ("text", "needle", "line"),
    [
        ("a: 1\nb: 2\na: 3\n", "duplicate key `a`", 3),
        ("a: [1, 2\n", "expected ','", 2),
        ("a: !!python/name:os.system x\n", "unsupported YAML tag", 1),
        ("a:\n\tb: 1\n", "tab", 2),
    ],
)
def test_yaml_errors_name_line(text: str, needle: str, line: int) -> None:
    with pytest.raises(InputError) as info:
        parse_yaml(text, "bad.yml")
    diag = info.value.diagnostics[0]
    assert needle in diag.message
    assert diag.location.file == "bad.yml"
    assert diag.location.line == line


def test_yaml_alias_bomb_is_refused_quickly() -> None:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        refs = ", ".join([f"*l{i - 1}"] * 10)
        lines.append(f"l{i}: &l{i} [{refs}]")
    with pytest.raises(InputError, match="alias bomb"):
        parse_yaml("\n".join(lines) + "\n", "bomb.yml")


# -- issue 13: fuzz-found scalar crashes and the last conformance gaps --------------------


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("a: !!int abc\n", "`abc` is not an integer"),
        ("a: !!int 0x\n", "`0x` is not an integer"),
        ("!!float\n", "is not a float"),
        ("a: !!bool maybe\n", "is not a boolean"),
    ],
)
def test_bad_explicit_tags_are_located_errors(text: str, needle: str) -> None:
    # item 5: these raised ValueError from int()/float()
    with pytest.raises(InputError) as caught:
        parse_yaml(text, "r.yml")
    diag = caught.value.diagnostics[0]
    assert needle in diag.message and diag.location.file == "r.yml" and diag.location.line == 1
    assert caught.value.exit_code == 1


def test_integers_beyond_128_bits_never_raise_and_read_as_serde_yaml_does() -> None:
    # item 5: a 5,000-digit integer raised ValueError (int max str digits)
    data = parse_yaml(
        "big: " + "9" * 5000 + "\nwide: 1" + "0" * 40 + "\nhex: 0x" + "f" * 40 + "\n"
        "u128: 340282366920938463463374607431768211455\n"
    ).data
    assert data["big"] == "9" * 5000  # not finite as a float: a string
    assert data["wide"] == 1e40  # beyond 128 bits but finite: a float
    assert data["hex"] == "0x" + "f" * 40
    assert data["u128"] == 2**128 - 1


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("012", "012"),
        ("-012", "-012"),
        ("+007", "+007"),
        ("00", "00"),
        ("0", 0),
        ("-0", 0),
        ("12", 12),
        ("012.5", 12.5),
        ("0x1F", 31),
        ("0o17", 15),
        ("0b101", 5),
        ("1e999", "1e999"),
    ],
)
def test_yaml_1_2_scalars_as_serde_yaml_resolves_them(scalar: str, value: object) -> None:
    # item 11: a leading zero followed by digits is a string, not 12
    assert parse_yaml(f"v: {scalar}\n").data["v"] == value


def test_a_byte_order_mark_is_refused_with_a_clear_message() -> None:
    # item 13: the reference rejects a BOM; "utf-8-sig" silently accepted it
    with pytest.raises(InputError) as caught:
        decode_source(b"\xef\xbb\xbfschema: skillspec/v0\n", "skill.spec.yml")
    diag = caught.value.diagnostics[0]
    assert "byte order mark" in diag.message and "without a BOM" in diag.hint
    assert (diag.location.line, diag.location.col) == (1, 1) and caught.value.exit_code == 1
    with pytest.raises(InputError):
        parse_yaml("\ufeffa: 1\n", "x.yml")


def test_duplicate_keys_name_the_deliberate_divergence() -> None:
    # item 15: keep refusing, and say why this differs from the reference
    with pytest.raises(InputError) as caught:
        parse_yaml("a: 1\nb: 2\na: 3\n", "d.yml")
    diag = caught.value.diagnostics[0]
    assert diag.location.line == 3 and "duplicate key `a`" in diag.message
    assert "deliberate divergence" in diag.hint and "last" in diag.hint


def test_parse_failures_are_invalid_source_and_unreadable_files_are_input_errors(
    tmp_path: Path,
) -> None:
    # item 14: read-but-bad is exit 1; cannot-read is exit 2
    with pytest.raises(InputError) as bad:
        parse_yaml("a: [\n")
    assert bad.value.exit_code == 1
    with pytest.raises(InputError) as caught:
        load_yaml_file(tmp_path / "absent.yml")
    assert caught.value.exit_code == 2
