"""CI runs exactly the README's test command, and that command runs every check before pytest."""

from __future__ import annotations

from tests.conftest import ROOT

CHECKS = (
    ".venv/bin/ruff format --check .",
    ".venv/bin/ruff check .",
    ".venv/bin/mypy",
    ".venv/bin/lint-imports",
    ".venv/bin/python -m pytest",
)


def _readme_test_command() -> str:
    """The second indented command at the top of README.md ("Set up and run the tests")."""
    commands = [
        line.strip()
        for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("    python3 -m venv")
    ]
    assert len(commands) >= 2, "README.md lost its set-up commands"
    return commands[1]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    command = _readme_test_command()
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in [line.strip() for line in lines]


def test_the_readme_test_command_runs_every_check_before_pytest() -> None:
    steps = [step.strip() for step in _readme_test_command().split("&&")]
    assert steps[:2] == ["python3 -m venv .venv", ".venv/bin/pip install -q -e '.[dev]'"]
    assert tuple(steps[2:]) == CHECKS
