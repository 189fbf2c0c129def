"""Cold ``skillspec validate`` on the largest corpus spec, against ``python -c pass``.

A user runs ``skillspec validate`` from a shell or a pre-commit hook, so what
matters is the whole process: interpreter start, imports, reading, checking.
We time the installed console script in fresh subprocesses (median of N) and
report the interpreter's own start in the same run as the baseline. We also
report whether Textual got imported (it must not: the CLI stays light).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.benchmarks._common import Row  # noqa: E402
from tests.conftest import REFERENCE  # noqa: E402

SKILLSPEC = ROOT / ".venv" / "bin" / "skillspec"
PYTHON = ROOT / ".venv" / "bin" / "python"


def largest_spec() -> Path | None:
    specs = sorted(REFERENCE.rglob("*skill.spec.yml"), key=lambda p: p.stat().st_size)
    return specs[-1] if specs else None


def median_ms(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def textual_imported(spec: Path) -> bool:
    script = (
        "import sys\nfrom engine.cli.skillspec import main\n"
        "main(['validate', sys.argv[1]])\n"
        "print(any(m == 'textual' or m.startswith('textual.') for m in sys.modules))\n"
    )
    out = subprocess.run(
        [str(PYTHON), "-c", script, str(spec)], capture_output=True, text=True, cwd=ROOT
    ).stdout
    return out.strip().endswith("True")


def run(quick: bool) -> list[Row]:
    spec = largest_spec()
    if spec is None or not SKILLSPEC.exists():
        return []
    runs = 5 if quick else 15
    baseline = median_ms([str(PYTHON), "-c", "pass"], runs)
    cold = median_ms([str(SKILLSPEC), "validate", str(spec)], runs)
    size_kb = spec.stat().st_size / 1024
    return [
        Row("python -c pass (baseline)", baseline, "ms", higher_is_better=False),
        Row(
            "skillspec validate cold (largest corpus spec)",
            cold,
            "ms",
            target=150,
            higher_is_better=False,
            note=(
                f"{spec.relative_to(REFERENCE)} ({size_kb:.0f} KiB), median of {runs}; "
                f"{cold - baseline:.0f} ms over bare interpreter start; "
                f"textual imported: {'YES' if textual_imported(spec) else 'no'}"
            ),
        ),
    ]


if __name__ == "__main__":
    from tests.benchmarks._common import print_table

    print_table(run(quick="--quick" in sys.argv))
