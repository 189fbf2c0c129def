"""Cold ``skillspec validate`` on the largest corpus spec, against ``python -c pass``.

A user runs ``skillspec validate`` from a shell or a pre-commit hook, so what
matters is the whole process: interpreter start, imports, reading, checking.
We time the venv's console script in fresh processes (median of N,
alternating with ``python -c pass`` of the same interpreter as the baseline)
with bytecode, as an installed package has it (see ``_coldstart.py``); the
tree under test comes first on ``PYTHONPATH``. Target (issue 14): <= 80 ms.
We also report whether Textual got imported (it must not: the CLI stays light).
"""

from __future__ import annotations

import os
import subprocess
import sys
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


def run(quick: bool) -> list[Row]:
    spec = largest_spec()
    if spec is None:
        return []
    runs = 7 if quick else 21
    argv = [*command(), "validate", str(spec)]
    cold = time_cold(argv, runs, child_env())
    size_kb = spec.stat().st_size / 1024
    return [
        Row("python -c pass (baseline)", cold.pass_wall_ms, "ms", higher_is_better=False),
        Row(
            "skillspec validate cold (largest corpus spec)",
            cold.wall_ms,
            "ms",
            target=80,
            higher_is_better=False,
            baseline=cold.pass_wall_ms,
            note=(
                f"{spec.relative_to(REFERENCE)} ({size_kb:.0f} KiB), median of {runs}, with "
                f"bytecode; {cold.over_pass_ms:.0f} ms over bare interpreter start "
                f"(ratio = pass / validate); {interpreter_note()}; "
                f"textual imported: {'YES' if textual_imported(spec) else 'no'}"
            ),
        ),
        Row(
            "skillspec validate CPU (user+sys)",
            cold.cpu_ms,
            "ms",
            higher_is_better=False,
            baseline=cold.pass_cpu_ms,
            note=f"mean; `python -c pass` uses {cold.pass_cpu_ms:.1f} ms CPU; {load_note()}",
        ),
    ]


if __name__ == "__main__":
    from tests.benchmarks._common import print_table

    print_table(run(quick="--quick" in sys.argv))
