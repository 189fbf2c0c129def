"""Strict YAML 1.2 with positions: the parser under every spec and rule file."""

from __future__ import annotations

import pytest

from engine.errors import InputError
from engine.yamlsrc import LocDict, parse_yaml


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
