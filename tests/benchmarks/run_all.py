"""Run every benchmark (``tests/benchmarks/bench_*.py``) and print one table.

Each benchmark module exposes ``run(quick: bool) -> list[Row]``. ``--quick``
uses smaller inputs for a smoke run; ``-k NAME`` selects modules by substring.

    .venv/bin/python tests/benchmarks/run_all.py [--quick] [-k journal]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.benchmarks._common import Row, print_table  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small inputs, for a smoke run")
    parser.add_argument("-k", dest="select", default="", help="only modules whose name has this")
    args = parser.parse_args()
    rows: list[Row] = []
    failed = []
    for path in sorted(Path(__file__).parent.glob("bench_*.py")):
        if args.select and args.select not in path.stem:
            continue
        print(f"running {path.stem} …", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(f"tests.benchmarks.{path.stem}")
            rows.extend(module.run(quick=args.quick))
        except Exception:
            failed.append(path.stem)
            traceback.print_exc()
    print_table(rows)
    if failed:
        print(f"\nbenchmarks that crashed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
