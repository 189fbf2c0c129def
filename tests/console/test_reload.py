"""Reload with a real temporary directory: valid edit, broken edit, fix.

Files are replaced the way editors save (write a temp file, rename it over
the original), which a watch on the file alone would miss.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from console.panes.decide import DecidePane
from console.panes.rules import RulesPane
from tests.console.conftest import SPEC_TEXT, AppFactory, until


def _save_by_rename(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.swp-new")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _error_text(app: object) -> str:
    box = app.query_one("#decide-error", Static)  # type: ignore[attr-defined]
    return "" if box.has_class("hidden") else str(box.render())


async def test_spec_valid_edit_broken_edit_fix(make_app: AppFactory, spec_file: Path) -> None:
    app = make_app(
        initial="decide", specs=(str(spec_file.parent / "*.spec.yml"),), watch_files=True
    )
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(DecidePane)
        await until(pilot, lambda: pane.spec is not None)
        app.query_one("#decide-input", Input).value = "fill the form"
        await until(pilot, lambda: pane.result is not None and pane.result.decision.forbid)
        await pilot.pause(0.3)  # let the watcher start

        valid = SPEC_TEXT.replace("forbid: [guess_field_names]", "forbid: [invent_values]")
        _save_by_rename(spec_file, valid)
        await until(
            pilot,
            lambda: pane.result is not None and pane.result.decision.forbid == ("invent_values",),
        )

        broken = valid.replace("    prefer: fill_pdf_form\n", "    prefer: [fill_pdf_form\n")
        _save_by_rename(spec_file, broken)
        await until(pilot, lambda: _error_text(app))
        error = _error_text(app)
        assert f"{spec_file.name}:" in error and "keeping the last good version" in error
        line = next(i for i, ln in enumerate(broken.splitlines(), 1) if "prefer: [" in ln)
        assert f":{line}" in error or f":{line + 1}" in error
        assert pane.spec is not None and pane.result is not None
        assert pane.result.decision.forbid == ("invent_values",)  # last good version

        _save_by_rename(spec_file, SPEC_TEXT)
        await until(pilot, lambda: not _error_text(app))
        await until(
            pilot,
            lambda: (
                pane.result is not None and pane.result.decision.forbid == ("guess_field_names",)
            ),
        )


RULE = """\
name: console_probe
description: Watches the console reload.
on: run_event
when: event.type == "restart"
level: notify
target: harness
cooldown: 5m
"""


async def test_rule_valid_edit_broken_edit_fix(make_app: AppFactory, policy_dir: Path) -> None:
    rule = policy_dir / "console_probe.yml"
    rule.write_text(RULE, encoding="utf-8")
    app = make_app(initial="rules", watch_files=True, policy=policy_dir)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(RulesPane)
        await until(pilot, lambda: any(r.name == "console_probe" for r in pane.rows))
        first = next(r for r in pane.rows if r.name == "console_probe")
        assert first.state == "shadow"
        await pilot.pause(0.3)

        _save_by_rename(rule, RULE.replace("level: notify", "level: annotate"))
        await until(
            pilot,
            lambda: any(r.name == "console_probe" and r.level == "annotate" for r in pane.rows),
        )
        changed = next(r for r in pane.rows if r.name == "console_probe")
        assert changed.hash != first.hash and changed.state == "shadow"

        _save_by_rename(rule, RULE.replace('event.type == "restart"', "event.nope =="))
        errors = app.query_one("#rules-errors", Static)
        await until(pilot, lambda: not errors.has_class("hidden"))
        assert "console_probe.yml:4" in str(errors.render())
        kept = next(r for r in pane.rows if r.name == "console_probe")
        assert kept.level == "annotate"  # the last good version stays listed

        _save_by_rename(rule, RULE)
        await until(pilot, lambda: errors.has_class("hidden"))
        await until(
            pilot,
            lambda: any(r.name == "console_probe" and r.level == "notify" for r in pane.rows),
        )


async def test_config_broken_edit_keeps_last_good(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.config import HarnessConfig
    from engine.views.session import ConsoleOptions

    cfg = tmp_path / "cfgdir" / "harness.toml"
    cfg.parent.mkdir()
    cfg.write_text('[memory.rules]\nenforce = ["restart_same_error"]\n', encoding="utf-8")
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    app = make_app(initial="rules", watch_files=True, config=HarnessConfig())
    app.context.options = ConsoleOptions(
        store_path=app.context.options.store_path,
        policy_dir=app.context.options.policy_dir,
        config_file=cfg,
    )
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.3)
        _save_by_rename(cfg, "[memory.rules]\nenforce = [\n")
        await until(pilot, lambda: app.config_error)
        assert "harness.toml:" in app.config_error
        assert app.context.current_config.rules.enforce == ()  # last good (initial) kept
        _save_by_rename(cfg, '[memory.rules]\nenforce = ["file_churn"]\n')
        await until(pilot, lambda: app.context.current_config.rules.enforce == ("file_churn",))
        assert app.config_error == ""
