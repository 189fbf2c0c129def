"""Files a spec names are read only when regular and small: no OOM, no hang, no traceback.

Every case that could hang or exhaust memory before the fix (``/dev/zero``,
a FIFO) runs in a subprocess with a timeout and an address-space limit, so a
regression fails the test instead of stalling the suite.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.skillspec.deps import check_deps
from engine.skillspec.files import UnreadableFile, read_regular_file
from engine.skillspec.load import check_spec
from engine.yamlsrc import MAX_BYTES
from tests.conftest import ROOT
from tests.skillspec.fixtures.cases import spec

IMPORT = "  guide: {path: target.md, role: policy, load: always, section: Setup}\n"

RUNNER = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    "from engine.cli.skillspec import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)

FINGERPRINT = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    "from engine.skillspec.load import spec_fingerprint\n"
    "print(spec_fingerprint(sys.argv[1]))\n"
)


def _devzero(target: Path) -> str:
    target.symlink_to("/dev/zero")
    return "character device"


def _fifo(target: Path) -> str:
    os.mkfifo(target)
    return "FIFO"


def _sparse(target: Path) -> str:
    with open(target, "wb") as fh:
        fh.truncate(MAX_BYTES + 10)
    return f"file is larger than {MAX_BYTES} bytes ({MAX_BYTES + 10} bytes)"


def _directory(target: Path) -> str:
    target.mkdir()
    return "directory"


MAKERS: dict[str, Callable[[Path], str]] = {
    "devzero_symlink": _devzero,
    "fifo": _fifo,
    "sparse_over_cap": _sparse,
    "directory": _directory,
}


def make_skill(tmp_path: Path, kind: str) -> tuple[Path, str, str]:
    """A valid spec importing ``target.md`` of ``kind``; returns (spec, reason, file:line:col)."""
    skill = tmp_path / "skill"
    skill.mkdir()
    path = skill / "skill.spec.yml"
    text = spec("imports:\n" + IMPORT)
    path.write_text(text)
    reason = MAKERS[kind](skill / "target.md")
    lines = text.splitlines()
    line = next(i for i, ln in enumerate(lines, 1) if "path: target.md" in ln)
    col = lines[line - 1].index("target.md") + 1
    return path, reason, f"{path}:{line}:{col}"


def run(*argv: str, script: str = RUNNER) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_validate_refuses_unusable_import_with_its_location(tmp_path: Path, kind: str) -> None:
    path, reason, where = make_skill(tmp_path, kind)
    proc = run("validate", str(path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Traceback" not in out
    error = next(ln for ln in out.splitlines() if ": error: " in ln)
    assert error.startswith(f"{where}: error: imports.guide.path: missing_file")
    assert reason in error


@pytest.mark.parametrize("kind", ["devzero_symlink", "fifo", "sparse_over_cap"])
def test_imports_check_and_test_fail_cleanly(tmp_path: Path, kind: str) -> None:
    path, reason, _ = make_skill(tmp_path, kind)
    proc = run("imports", "check", str(path))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout.startswith("missing_file     guide: target.md")
    assert reason in proc.stdout
    proc = run("test", str(path))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert reason in proc.stdout + proc.stderr


@pytest.mark.parametrize("kind", ["devzero_symlink", "fifo", "sparse_over_cap"])
def test_fingerprint_skips_unusable_import(tmp_path: Path, kind: str) -> None:
    path, _, _ = make_skill(tmp_path, kind)
    proc = run(str(path), script=FINGERPRINT)
    assert proc.returncode == 0, proc.stderr
    expected = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert proc.stdout.strip() == expected


def test_fingerprint_still_hashes_a_regular_import(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    path = skill / "skill.spec.yml"
    path.write_text(spec("imports:\n" + IMPORT))
    (skill / "target.md").write_text("# Setup\nstep\n")
    proc = run(str(path), script=FINGERPRINT)
    digest = hashlib.sha256(path.read_bytes() + b"# Setup\nstep\n").hexdigest()
    assert proc.stdout.strip() == f"sha256:{digest}"


def test_spec_path_that_is_a_fifo_is_unreadable_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "skill.spec.yml"
    os.mkfifo(path)
    proc = run("validate", str(path))
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "cannot read: a FIFO" in proc.stderr
    assert str(path) in proc.stderr


def test_read_regular_file_reads_up_to_the_cap_and_no_further(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_regular_file(path, cap=100) == b"x" * 100
    path.write_bytes(b"x" * 101)
    with pytest.raises(UnreadableFile, match=r"file is larger than 100 bytes \(101 bytes\)"):
        read_regular_file(path, cap=100)
    with pytest.raises(UnreadableFile, match="No such file"):
        read_regular_file(tmp_path / "absent")


def test_import_just_under_the_cap_is_read(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    path = skill / "skill.spec.yml"
    path.write_text(spec("imports:\n" + IMPORT))
    body = b"# Setup\n" + b"a" * (MAX_BYTES - 8)
    (skill / "target.md").write_bytes(body)
    assert len(body) == MAX_BYTES
    report = check_spec(path)
    assert report.ok, [str(d) for d in report.errors]


def test_deps_ledger_that_is_a_fifo_is_missing(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "deps.toml")
    path = tmp_path / "skill.spec.yml"
    path.write_text(spec("dependencies:\n  ledger: {kind: file, path: deps.toml}\n"))
    report = check_spec(path, resolve_files=False)
    assert report.data is not None
    (dep,) = check_deps(report.data, path).dependencies
    assert (dep.status, dep.message) == ("missing", "deps.toml is not a regular file")
