"""The one parser both programs share: ``--version``, exit codes, the console's plugin point."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from typing import Any

import pytest

from engine.cli import cmd_console, harness, parser, skillspec
from tests.conftest import ROOT


@pytest.mark.parametrize("program", [harness, skillspec])
def test_version_prints_the_distribution_version(
    program: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        program.main(["--version"])
    assert done.value.code == 0
    name = program.PROGRAM.prog
    assert capsys.readouterr().out.strip() == f"{name} {parser.package_version()}"


def test_version_is_the_installed_one_or_the_source_trees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parser.package_version() == metadata.version("harness-console")

    def missing(_name: str) -> str:
        raise metadata.PackageNotFoundError(_name)

    monkeypatch.setattr(metadata, "version", missing)
    import engine

    monkeypatch.setattr(engine, "__version__", "9.9.9", raising=False)
    assert parser.package_version() == "9.9.9"


@pytest.mark.parametrize("module", ["engine.cli.harness", "engine.cli.skillspec"])
def test_version_from_the_command_line(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", module, "--version"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    prog = module.rsplit(".", 1)[1]
    assert out.stdout.split() == [prog, parser.package_version()]


@pytest.mark.parametrize("program", [harness, skillspec])
def test_bad_usage_is_exit_2_in_both_programs(
    program: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        program.main(["no-such-command"])
    assert done.value.code == 2
    assert program.main([]) == 2  # no command: help on stderr, exit 2
    assert "usage:" in capsys.readouterr().err


def test_skillspec_command_modules_use_the_shared_exit_codes_and_json() -> None:
    for name in ("cmd_spec_check.py", "cmd_spec_decide.py", "skillspec.py"):
        text = (ROOT / "engine" / "cli" / name).read_text(encoding="utf-8")
        assert "EXIT_OK =" not in text and "EXIT_OK, EXIT_FAILED =" not in text, name
        assert "def print_json" not in text and "def _print_json" not in text, name


def test_pyproject_declares_the_console_plugin_point() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    plugins = data["project"]["entry-points"][cmd_console.PLUGIN_GROUP]
    assert plugins[cmd_console.CONSOLE_ENTRY] == cmd_console.DEFAULT_CONSOLE_VALUE
    scripts = data["project"]["scripts"]
    assert scripts == {
        "harness": "engine.cli.harness:main",
        "skillspec": "engine.cli.skillspec:run",
    }


def test_console_opens_through_a_registered_entry_point(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_entry_points(**select: str) -> list[metadata.EntryPoint]:
        seen["select"] = select
        value = "tests.cli.test_program:_fake_console"
        return [metadata.EntryPoint(name="console", value=value, group=select["group"])]

    monkeypatch.setattr(metadata, "entry_points", fake_entry_points)
    from engine.store.db import connect

    connect(tmp_path / "j.db").close()  # the console refuses a store that does not exist
    assert harness.main(["console", "--store", str(tmp_path / "j.db")]) == 7
    assert seen["select"] == {"group": "harness_console.plugins", "name": "console"}
    assert _CALLS and _CALLS[-1].store_path == tmp_path / "j.db"


def test_console_entry_falls_back_to_the_declared_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "entry_points", lambda **_s: [])
    entry = cmd_console.console_entry()
    assert (entry.group, entry.name, entry.value) == (
        "harness_console.plugins",
        "console",
        "console.app:run_console",
    )


_CALLS: list[Any] = []


def _fake_console(options: Any) -> int:
    _CALLS.append(options)
    return 7
