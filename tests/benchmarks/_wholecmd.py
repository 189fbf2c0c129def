"""Whole commands as a user runs them: the installed console script, a fresh process, with bytecode.

Why: figures measured inside a benchmark process drifted far from what a user
met (issue 21: a backtest the benchmark put at 60x the scan was 3x as a
command). Every figure here is a child process started from the venv's
console script, with ``PYTHONDONTWRITEBYTECODE`` removed so it reads the
``.pyc`` files an installed package has (written beforehand by
:func:`compile_tree`, so no timed run compiles), its wall and CPU time and its
own peak RSS (from ``wait4``, not the runner's), its stdout kept in a file.
Commands and their baselines run interleaved, and each figure is the median of
the repeats, so load from other processes weighs on both alike.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.benchmarks._coldstart import with_bytecode

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Run:
    """One child process: wall and CPU seconds, its own peak RSS, where its stdout went."""

    secs: float
    cpu: float
    rss_mb: float
    out: Path
    code: int


def env(checkout: bool = True) -> dict[str, str]:
    """The children's environment: bytecode on; with ``checkout``, this checkout on the path.

    A console script of another venv (an older checkout, ``BENCH_BEFORE_VENV``)
    must not get this checkout on its path, or it would run today's code.
    """
    out = with_bytecode(dict(os.environ))
    out.pop("PYTHONPATH", None)
    if checkout:
        out["PYTHONPATH"] = str(ROOT)
    return out


def script(name: str, venv_bin: Path = BIN) -> str:
    """The console script ``name`` of a venv (this one by default)."""
    path = venv_bin / name
    if not path.exists():
        raise RuntimeError(f"no console script {path}: install the package (pip install -e .)")
    return str(path)


def compile_tree(venv_bin: Path = BIN) -> None:
    """Write every ``.pyc`` of the venv's ``engine`` first, as an installed package has them."""
    python = str(venv_bin / "python")
    where = subprocess.run(
        [python, "-c", "import engine, os; print(os.path.dirname(engine.__file__))"],
        env=env(checkout=False),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    subprocess.run(
        [python, "-m", "compileall", "-q", where],
        env=env(checkout=False),
        check=True,
        capture_output=True,
    )


def run(
    argv: list[str],
    out: Path,
    stdin: Path | None = None,
    cwd: Path = ROOT,
    extra_env: dict[str, str] | None = None,
) -> Run:
    """Run ``argv`` once; stdout to ``out`` (a file, so no pipe reader competes)."""
    with open(out, "wb") as sink:
        source = open(stdin, "rb") if stdin is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            start = time.perf_counter()
            proc = subprocess.Popen(
                argv,
                stdin=source,
                stdout=sink,
                stderr=subprocess.PIPE,
                env={**env(checkout=not _foreign(argv[0])), **(extra_env or {})},
                cwd=cwd,
            )
            _, status, usage = os.wait4(proc.pid, 0)
            secs = time.perf_counter() - start
        finally:
            if stdin is not None:
                source.close()  # type: ignore[union-attr]
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}: {err[-2000:]}")
    return Run(secs, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out, proc.returncode)


def _foreign(program: str) -> bool:
    """Whether ``program`` belongs to another venv than this interpreter's."""
    return Path(program).parent.resolve() != BIN.resolve() and program != sys.executable


def median(runs: list[Run]) -> Run:
    """The run with the median wall time."""
    return sorted(runs, key=lambda r: r.secs)[len(runs) // 2]


def spread(runs: list[Run]) -> str:
    return ", ".join(f"{r.secs:.2f}" for r in runs)


def cpu_median(runs: list[Run]) -> float:
    return statistics.median(r.cpu for r in runs)


def load_note() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"
