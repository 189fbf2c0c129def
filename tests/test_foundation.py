"""The shared pieces every surface relies on: strict YAML, config, durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import load_config, parse_config, resolve_store
from engine.durations import DurationError, format_duration_ms, parse_duration_ms
from engine.errors import InputError
from engine.yamlsrc import LocDict, parse_yaml


def test_yaml_is_1_2_on_and_yes_stay_strings() -> None:
    doc = parse_yaml("on: yes\nno: off\nflag: true\nn: 010\nz: ~\n", "r.yml")
    assert doc.data == {"on": "yes", "no": "off", "flag": True, "n": 10, "z": None}


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


def test_durations_round_trip() -> None:
    assert parse_duration_ms("1h30m") == 5_400_000
    assert parse_duration_ms("72h") == 259_200_000
    assert parse_duration_ms("250ms") == 250
    assert format_duration_ms(5_400_000) == "1h30m"
    for bad in ("", "10", "h", "1x", "1h 30m", "-1h"):
        with pytest.raises(DurationError):
            parse_duration_ms(bad)


def test_config_parses_every_pinned_key(tmp_path: Path) -> None:
    text = """
[store]
path = "~/j.db"
retention_days = 30

[memory]
rule_miners = ["restarts"]

[memory.rules]
enforce = ["restart_same_error", "file_churn@ab12"]
disable = ["file_churn"]
shadow_period = "48h"
cost_limit = 5000

[memory.rules.actions]
notify = ["notify-send", "{rule}", "{message}"]
stop = ["sup", "stop", "{harness}"]

[policy_repo.main]
path = "~/src/policy"
branch = "trunk"

[console]
specs = ["~/skills/**/skill.spec.yml"]
"""
    cfg = parse_config(text)
    assert cfg.retention_days == 30
    assert cfg.rules.enforce == ("restart_same_error", "file_churn@ab12")
    assert cfg.rules.shadow_period_ms == 48 * 3_600_000
    assert cfg.rules.actions["stop"] == ("sup", "stop", "{harness}")
    assert cfg.policy_repos[0].branch == "trunk"
    assert cfg.console_specs == ("~/skills/**/skill.spec.yml",)


@pytest.mark.parametrize(
    ("text", "path", "line"),
    [
        ("[memory.rules]\nenforse = ['x']\n", "memory.rules.enforse", 2),
        ("[memory.rules]\nenforce = 'x'\n", "memory.rules.enforce", 2),
        ("[store]\nretention_days = true\n", "store.retention_days", 2),
        ("[memory.rules]\nshadow_period = '3 days'\n", "memory.rules.shadow_period", 2),
        ("[policy_repo.x]\nurl = 'u'\n", "policy_repo.x", 1),
    ],
)
def test_config_errors_name_field_and_line(text: str, path: str, line: int) -> None:
    with pytest.raises(InputError) as info:
        parse_config(text, "h.toml")
    diag = info.value.diagnostics[0]
    assert diag.path == path
    assert diag.location.line == line


def test_config_syntax_error_has_line_and_col() -> None:
    with pytest.raises(InputError) as info:
        parse_config("[store]\npath = \n", "h.toml")
    loc = info.value.diagnostics[0].location
    assert loc.line == 2 and loc.col > 0


def test_config_comes_only_from_harness_config_or_xdg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "harness.toml").write_text("[memory.rules]\nenforce = ['evil']\n")
    monkeypatch.chdir(project)
    assert load_config().rules.enforce == ()
    cfg_file = tmp_path / "real.toml"
    cfg_file.write_text("[memory.rules]\nenforce = ['good']\n")
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg_file))
    assert load_config().rules.enforce == ("good",)


def test_store_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg_file = tmp_path / "h.toml"
    cfg_file.write_text(f"[store]\npath = '{tmp_path / 'cfg.db'}'\n")
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg_file))
    assert resolve_store(str(tmp_path / "cli.db")) == tmp_path / "cli.db"
    assert resolve_store(None) == tmp_path / "cfg.db"
    monkeypatch.delenv("HARNESS_CONFIG")
    assert resolve_store(None).name == "journal.db"
