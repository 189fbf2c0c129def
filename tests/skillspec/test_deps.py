"""Deps check: cli on PATH, file exists, env set; other kinds deferred; nothing is run."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from engine.skillspec.deps import DepsReport, check_deps
from engine.skillspec.load import check_spec
from tests.skillspec.fixtures.cases import spec


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding exactly one program, ``fakecli``, which would leave a mark if run."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "fakecli"
    tool.write_text(f"#!/bin/sh\ntouch {tmp_path}/RAN\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bindir))
    return bindir


def deps_of(tmp_path: Path, body: str) -> DepsReport:
    path = tmp_path / "skill.spec.yml"
    path.write_text(spec("dependencies:\n" + body))
    report = check_spec(path, resolve_files=False)
    assert report.data is not None and report.structural_ok, [str(d) for d in report.errors]
    return check_deps(report.data, path)


def by_id(report: DepsReport) -> dict[str, tuple[str, str, str]]:
    return {d.id: (d.status, d.check, d.message) for d in report.dependencies}


def test_cli_dependencies_use_check_command_then_command_then_id(
    tmp_path: Path, bin_dir: Path
) -> None:
    report = deps_of(
        tmp_path,
        "  fakecli: {kind: cli}\n"
        "  named: {kind: cli, command: fakecli --version}\n"
        "  checked: {kind: cli, command: nothere, check: {command: fakecli --help}}\n"
        "  absent: {kind: cli, command: definitely-not-installed-xyz}\n",
    )
    got = by_id(report)
    assert got["fakecli"][:2] == ("present", "path_lookup")
    assert got["named"] == ("present", "path_lookup", "fakecli found on PATH")
    assert got["checked"][0] == "present"
    assert got["absent"] == (
        "missing",
        "path_lookup",
        "definitely-not-installed-xyz not found on PATH",
    )
    assert not report.ok
    assert not (tmp_path / "RAN").exists(), "deps check must never run a program"


def test_file_dependencies_resolve_from_spec_dir(tmp_path: Path) -> None:
    (tmp_path / "present.txt").write_text("x")
    (tmp_path / "deps.toml").write_text("")
    report = deps_of(
        tmp_path,
        "  here: {kind: file, path: present.txt}\n"
        "  gone: {kind: file, path: absent.txt}\n"
        "  ledger: {kind: file, path: deps.toml}\n",
    )
    got = by_id(report)
    assert got["here"] == ("present", "file_exists", "present.txt exists")
    assert got["gone"] == ("missing", "file_exists", "absent.txt does not exist")
    assert got["ledger"] == ("missing", "file_exists", "deps.toml exists but is empty")


def test_env_dependencies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILL_TOKEN_SET", "1")
    monkeypatch.delenv("skill_token_by_id", raising=False)
    report = deps_of(
        tmp_path,
        "  tok: {kind: env, env: SKILL_TOKEN_SET}\n  skill_token_by_id: {kind: env}\n",
    )
    got = by_id(report)
    assert got["tok"] == ("present", "env_present", "SKILL_TOKEN_SET is set")
    # with no env name given, the dependency id is the variable name
    assert got["skill_token_by_id"] == ("missing", "env_present", "skill_token_by_id is not set")


def test_env_unset_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILL_TOKEN_UNSET", raising=False)
    report = deps_of(tmp_path, "  tok: {kind: env, check: {env: SKILL_TOKEN_UNSET}}\n")
    assert by_id(report)["tok"] == ("missing", "env_present", "SKILL_TOKEN_UNSET is not set")
    assert not report.ok


@pytest.mark.parametrize("kind", ["package", "service", "adapter", "browser"])
def test_other_kinds_need_a_harness_check_and_do_not_fail(tmp_path: Path, kind: str) -> None:
    report = deps_of(
        tmp_path,
        f"  thing:\n    kind: {kind}\n    permission: {{required: true}}\n"
        "    provision:\n      options: [{id: install, label: Install, command: pip install x}]\n",
    )
    (dep,) = report.dependencies
    assert (dep.status, dep.check) == ("deferred", "harness_required")
    assert "harness check" in dep.message
    assert dep.permission_required and dep.provisionable
    assert report.ok
    assert report.to_json()["dependencies"][0]["status"] == "deferred"
