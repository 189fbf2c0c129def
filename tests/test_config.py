"""harness.toml: every pinned key, located errors, and where it is read from."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import load_config, resolve_store
from engine.config_text import parse_config
from engine.errors import InputError


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
