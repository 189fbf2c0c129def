"""``harness rules lint``: same loader as the evaluator, three output formats, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.harness import main
from engine.config import HarnessConfig, RulesConfig
from engine.rules.language.lint import format_json, format_sarif, format_text, run_lint
from engine.rules.language.loader import ENFORCE_WARNING, load_rules

GOOD = """\
name: churny
on: graph_event
when: 'event.type == "churn" && count({"path": event.path}, duration("1h")) > 2'
level: notify
target: path
"""
BAD = """\
name: typo
on: run_event
when: >-
  event.type == "restart" &&
  count({"harness": event.harnes}, duration("1h")) >= 3
level: notify
target: harness
"""
STOPPER = GOOD.replace("name: churny", "name: stopper").replace("level: notify", "level: stop")


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    d = tmp_path / "rules"
    d.mkdir()
    (d / "good.yml").write_text(GOOD)
    (d / "bad.yml").write_text(BAD)
    (d / "stop.yml").write_text(STOPPER)
    return d


def test_lint_finds_exactly_what_the_loader_finds(rules_dir: Path) -> None:
    report = run_lint([str(rules_dir)], HarnessConfig())
    direct = load_rules([(rules_dir, "file")], RulesConfig())
    assert [d.to_json() for d in report.result.errors] == [d.to_json() for d in direct.errors]
    assert sorted(c.rule.hash for c in report.result.rules) == sorted(
        c.rule.hash for c in direct.rules
    )
    assert report.exit_code == 1


def test_text_has_location_and_caret(rules_dir: Path) -> None:
    text = format_text(run_lint([str(rules_dir)], HarnessConfig()))
    bad = str(rules_dir / "bad.yml")
    assert f"{bad}:5:26: error: when:" in text
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith(f"{bad}:5:26"))
    src, caret = lines[i + 1], lines[i + 2]
    assert "event.harnes" in src
    assert src[caret.index("^") :].startswith(".harnes")
    assert "2 rule(s) loaded, 1 error(s), 1 warning(s)" in text


def test_hold_and_stop_are_warned_never_granted(rules_dir: Path) -> None:
    report = run_lint([str(rules_dir / "stop.yml")], HarnessConfig())
    assert report.exit_code == 0
    (w,) = report.result.warnings
    assert w.severity == "warning" and ENFORCE_WARNING in w.message and "stopper" in w.message
    # the loaded rule keeps its written level: the cap is the lifecycle's decision, not lint's
    assert report.result.rules[0].rule.level == "stop"


def test_json_format(rules_dir: Path) -> None:
    data = format_json(run_lint([str(rules_dir)], HarnessConfig()))
    assert data["ok"] is False
    assert {r["name"] for r in data["rules"]} == {"churny", "stopper"}
    (err,) = data["errors"]
    assert (err["line"], err["col"], err["path"]) == (5, 26, "when")
    assert data["warnings"][0]["code"] == "not_enforced"


def test_sarif_2_1_0_shape(rules_dir: Path) -> None:
    sarif = format_sarif(run_lint([str(rules_dir)], HarnessConfig()))
    assert sarif["version"] == "2.1.0" and "sarif-2.1.0" in sarif["$schema"]
    (run,) = sarif["runs"]
    ids = {r["id"] for r in run["tool"]["driver"]["rules"]}
    levels = sorted(r["level"] for r in run["results"])
    assert levels == ["error", "warning"]
    for res in run["results"]:
        assert res["ruleId"] in ids
        region = res["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert res["message"]["text"]


def test_cli_exit_codes_and_formats(rules_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "lint", str(rules_dir / "good.yml")]) == 0
    capsys.readouterr()
    assert main(["rules", "lint", "--format", "json", str(rules_dir)]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False
    assert main(["rules", "lint", "--format", "sarif", str(rules_dir)]) == 1
    assert json.loads(capsys.readouterr().out)["version"] == "2.1.0"
    # An unreadable PATH is one more located error result, exit 1 (issue 13, item 10).
    assert main(["rules", "lint", str(rules_dir / "missing.yml")]) == 1
    assert "missing.yml" in capsys.readouterr().out


def test_default_lint_is_the_starter_pack_plus_policy_repos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "policy"
    (repo / "rules").mkdir(parents=True)
    (repo / "rules" / "x.yml").write_text(GOOD)
    cfg = tmp_path / "harness.toml"
    cfg.write_text(f'[policy_repo.main]\npath = "{repo}"\n')
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    assert main(["rules", "lint", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = {r["name"] for r in data["rules"]}
    assert "churny" in names and "restart_same_error" in names
    assert [s["kind"] for s in data["sources"]] == ["starter", "policy"]


def test_lint_needs_no_store_and_never_imports_textual(tmp_path: Path) -> None:
    code = (
        "import sys; from engine.cli.harness import main; "
        f"rc = main(['rules', 'lint', {str(tmp_path)!r}]); "
        "assert 'textual' not in sys.modules; sys.exit(rc)"
    )
    (tmp_path / "ok.yml").write_text(GOOD)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.rglob("*.db"))
