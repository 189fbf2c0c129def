"""``harness console``: options resolve before the screen opens; errors exit 2 without Textual."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.cli.harness import main
from engine.store.db import connect
from tests.conftest import ROOT


def test_console_help_lists_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["console", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--store", "--demo", "--spec", "--policy"):
        assert flag in out


def test_bad_policy_dir_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    assert main(["console", "--store", str(tmp_path / "j.db"), "--policy", str(missing)]) == 2
    assert "--policy" in capsys.readouterr().err


def test_malformed_config_is_exit_2_with_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "harness.toml"
    cfg.write_text("[memory.rules]\nenforce = 3\n", encoding="utf-8")
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    assert main(["console", "--store", str(tmp_path / "j.db")]) == 2
    assert f"{cfg}:2:1" in capsys.readouterr().err


def test_options_reach_the_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import console.app

    seen: dict[str, Any] = {}

    def fake_run(options: Any) -> int:
        seen["options"] = options
        return 0

    monkeypatch.setattr(console.app, "run_console", fake_run)
    spec = tmp_path / "s.spec.yml"
    spec.write_text("schema: skillspec/v0\n", encoding="utf-8")
    store = tmp_path / "j.db"
    connect(store).close()
    assert main(["console", "--store", str(store), "--spec", str(tmp_path / "*.spec.yml")]) == 0
    options = seen["options"]
    assert options.store_path == store and not options.demo
    assert options.spec_files() == [spec.resolve()]


def test_demo_uses_a_temp_store_and_a_shadowed_override(monkeypatch: pytest.MonkeyPatch) -> None:
    import console.app

    seen: dict[str, Any] = {}
    monkeypatch.setattr(console.app, "run_console", lambda o: seen.setdefault("o", o) and 0)
    assert main(["console", "--demo"]) == 0
    options = seen["o"]
    assert options.demo and options.store_path.name == "journal.db"
    assert "harness-demo-" in str(options.store_path)
    assert options.policy_dir is not None and any(options.policy_dir.glob("*.yml"))
    assert "restart_same_error" in options.config.rules.enforce
    # run_console, which removes the demo's temporary store on exit, was replaced here
    assert options.temp_dir is not None
    shutil.rmtree(options.temp_dir)


def test_console_command_does_not_import_textual_until_run() -> None:
    code = (
        "import sys\n"
        "from engine.cli.harness import build_parser\n"
        "build_parser().parse_args(['console', '--store', 'x.db'])\n"
        "print(any(m.split('.')[0] == 'textual' for m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_demo_refuses_an_existing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.store.db import connect

    store = tmp_path / "real.db"
    connect(store).close()
    assert main(["console", "--demo", "--store", str(store)]) == 2
    assert "new store path" in capsys.readouterr().err


def test_missing_store_is_refused_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 11 item 9: `--store /typo.db` says it does not exist and how to make one."""
    typo = tmp_path / "typo.db"
    assert main(["console", "--store", str(typo)]) == 2
    err = capsys.readouterr().err
    assert str(typo) in err and "no such store" in err and "harness demo --store" in err
    assert not typo.exists()
