"""Cold ``skillspec validate`` and ``skillspec test`` on the largest corpus spec, beside ``pass``.

A user runs ``skillspec validate`` from a shell or a pre-commit hook, and
``skillspec test`` beside it, so what matters is the whole process:
interpreter start, imports, reading, checking, deciding. We time the venv's
console script in fresh processes (median of N, alternating with ``python -c
pass`` of the same interpreter as the baseline) with bytecode, as an
installed package has it (see ``_coldstart.py``); the tree under test comes
first on ``PYTHONPATH``. Targets (issue 21): validate <= 2.5x and test <= 3x
the bare interpreter start of the same run (issue 14's 80 ms for validate is
shown too). The in-process time of the same work is printed beside each, and
whether Textual got imported (it must not: the CLI stays light).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.benchmarks._coldstart import (  # noqa: E402
    interpreter_note,
    load_note,
    time_cold,
    with_bytecode,
)
from tests.benchmarks._common import Row  # noqa: E402
from tests.conftest import REFERENCE  # noqa: E402

#: The installed console script beside this interpreter (``-m`` when there is none).
SCRIPT = Path(sys.executable).parent / "skillspec"


def largest_spec() -> Path | None:
    specs = sorted(REFERENCE.rglob("*skill.spec.yml"), key=lambda p: p.stat().st_size)
    return specs[-1] if specs else None


def command() -> list[str]:
    if SCRIPT.exists():
        return [str(SCRIPT)]
    return [sys.executable, "-m", "engine.cli.skillspec"]


def script_note() -> str:
    """Whether the installed script runs ``engine.cli.skillspec:run`` (the exit without teardown).

    A venv installed before the entry point changed still runs ``main``; its
    figures then include the interpreter's teardown until ``pip install -e .``.
    """
    if not SCRIPT.exists():
        return "no console script: `python -m engine.cli.skillspec`"
    if "import run" in SCRIPT.read_text(encoding="utf-8", errors="replace"):
        return "console script runs engine.cli.skillspec:run"
    return "console script predates engine.cli.skillspec:run (reinstall: pip install -e .)"


def child_env() -> dict[str, str]:
    env = with_bytecode(dict(os.environ))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def textual_imported(spec: Path) -> bool:
    script = (
        "import sys\nfrom engine.cli.skillspec import main\n"
        "main(['validate', sys.argv[1]])\n"
        "print(any(m == 'textual' or m.startswith('textual.') for m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(spec)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=child_env(),
    ).stdout
    return out.strip().endswith("True")


def in_process_ms(spec: Path, what: str) -> float:
    """The same work in a warm process (imports done), best of five: what start-up adds to."""
    from engine.skillspec.load import check_spec, load_decidable
    from engine.skillspec.scenarios import run_tests

    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        if what == "validate":
            check_spec(spec)
        else:
            loaded = load_decidable(spec)
            assert loaded.compiled is not None
            run_tests(loaded.compiled)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def run(quick: bool) -> list[Row]:
    spec = largest_spec()
    if spec is None:
        return []
    runs = 7 if quick else 21
    rows: list[Row] = []
    size_kb = spec.stat().st_size / 1024
    for what, factor in (("validate", 2.5), ("test", 3.0)):
        cold = time_cold([*command(), what, str(spec)], runs, child_env())
        rows.append(
            Row(
                f"skillspec {what} cold (largest corpus spec)",
                cold.wall_ms,
                "ms",
                target=factor * cold.pass_wall_ms,
                higher_is_better=False,
                baseline=cold.pass_wall_ms,
                note=(
                    f"{spec.relative_to(REFERENCE)} ({size_kb:.0f} KiB), median of {runs}, with"
                    f" bytecode, alternating with `python -c pass` ({cold.pass_wall_ms:.1f} ms):"
                    f" {cold.wall_ms / cold.pass_wall_ms:.2f}x it (target {factor}x"
                    + (", and issue 14's 80 ms" if what == "validate" else "")
                    + f"); {cold.over_pass_ms:.0f} ms over bare interpreter start; in process"
                    f" the same work takes {in_process_ms(spec, what):.1f} ms; CPU"
                    f" {cold.cpu_ms:.1f} ms against {cold.pass_cpu_ms:.1f} ms; ratio ="
                    f" pass / {what}; {script_note()}; {interpreter_note()}; {load_note()}"
                ),
            )
        )
    rows.insert(
        0, Row("python -c pass (baseline)", cold.pass_wall_ms, "ms", higher_is_better=False)
    )
    rows.append(
        Row(
            "skillspec validate imports textual",
            float(textual_imported(spec)),
            "bool",
            target=0,
            higher_is_better=False,
        )
    )
    return rows


if __name__ == "__main__":
    from tests.benchmarks._common import print_table

    print_table(run(quick="--quick" in sys.argv))
