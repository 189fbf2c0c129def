"""Cold-start timing of a command in fresh processes, beside ``python -c pass`` of the same run.

Shared by the benchmarks of the commands that must start fast (``harness
hook claude-code``, issue 10; ``skillspec validate``, issue 14). Three things
make the figure mean what an installed command costs:

- Bytecode as an installed package has it: ``PYTHONDONTWRITEBYTECODE`` is
  removed from the children's environment and one untimed run writes the
  ``.pyc`` files, so the timed runs do not measure compilation.
- The baseline is the same interpreter with the same environment, whose
  ``site`` also runs whatever ``.pth`` files the venv has (an editable
  install's finder costs ~15 ms in both); the note says which.
- Command and baseline runs alternate, so load from other processes weighs
  on both alike; CPU time (user+sys) is reported beside wall time because it
  is far less sensitive to that load.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT


@dataclass(frozen=True)
class ColdStart:
    """Median wall and mean CPU milliseconds of a command and of ``python -c pass``."""

    wall_ms: float
    cpu_ms: float
    pass_wall_ms: float
    pass_cpu_ms: float
    runs: int

    @property
    def over_pass_ms(self) -> float:
        return self.wall_ms - self.pass_wall_ms


def with_bytecode(env: dict[str, str]) -> dict[str, str]:
    """``env`` without ``PYTHONDONTWRITEBYTECODE``: children read and write ``.pyc`` files."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def interpreter_note() -> str:
    """Which interpreter the baseline is, and whether its ``site`` runs an editable finder."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    editable = any(purelib.glob("__editable__*.pth"))
    finder = "runs the editable-install finder (.pth)" if editable else "has no editable finder"
    return f"baseline = `{sys.executable} -c pass`, whose site {finder} as the command's does"


def _one(argv: list[str], env: dict[str, str], stdin: bytes, cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, capture_output=True, check=True, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000


def time_cold(
    argv: list[str], runs: int, env: dict[str, str], stdin: bytes = b"", cwd: Path = ROOT
) -> ColdStart:
    """Time ``argv`` against ``python -c pass``, alternating, after one untimed warming run."""
    env = with_bytecode(env)
    subprocess.run(argv, input=stdin, env=env, capture_output=True, check=True, cwd=cwd)
    base = [sys.executable, "-c", "pass"]
    subprocess.run(base, env=env, capture_output=True, check=True, cwd=cwd)
    command: list[tuple[float, float]] = []
    baseline: list[tuple[float, float]] = []
    for _ in range(runs):
        baseline.append(_one(base, env, b"", cwd))
        command.append(_one(argv, env, stdin, cwd))
    return ColdStart(
        wall_ms=statistics.median(w for w, _ in command),
        cpu_ms=statistics.fmean(c for _, c in command),
        pass_wall_ms=statistics.median(w for w, _ in baseline),
        pass_cpu_ms=statistics.fmean(c for _, c in baseline),
        runs=runs,
    )


def load_note() -> str:
    return f"load average {os.getloadavg()[0]:.1f} at the end of this run"
