"""Decisions per second on a generated 200-rule spec, in process and as a whole command.

The in-process API (``compile_spec`` once, ``decide`` per input) is compared
with a naive matcher measured in the same run (every rule's phrases turned
into a regex compiled on each call, the way a first draft would do it).

The batch command (issue 21) is measured as a user runs it: the installed
``skillspec decide SPEC --inputs FILE --json`` console script, with bytecode,
a fresh process each time, interleaved three times with a Python JSON echo of
the same lines (``json.loads`` and ``json.dumps`` per line, the floor of any
Python line processor), medians; target 0.5x the echo. Two corpora of 20,000
lines: the one this benchmark always used (2,000 inputs, each ten times) and
20,000 different inputs, where nothing a batch may remember helps. The
in-process time of the same batch, and whether the command printed exactly
those lines, are shown beside each.
"""

from __future__ import annotations

import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.skillspec.decide import compile_spec, decide, decision_json_line  # noqa: E402
from tests.benchmarks._common import Row  # noqa: E402

WORDS = [
    f"{a}{b}"
    for a in ("br", "cl", "dep", "st", "mon", "tr", "gr", "pl")
    for b in ("owse", "ick", "loy", "atus", "itor", "ace", "aph", "an", "ow", "ent")
]
FILLER = ["the", "a", "please", "and", "then", "my", "repo", "now", "with", "for"]
BOOLS = [
    "task_recurrence_likely",
    "domain_object_task",
    "interactive_prompt_likely",
    "command_likely_long_running",
]


def make_spec(n_rules: int = 200, seed: int = 7) -> dict[str, Any]:
    rnd = random.Random(seed)
    routes = [
        {"id": f"route{i}", "label": f"Route {i}", "rank": rnd.randint(1, 50)} for i in range(12)
    ]
    rules = []
    for i in range(n_rules):
        when: dict[str, Any] = {}
        phrases = [" ".join(rnd.sample(WORDS, rnd.choice((1, 1, 2)))) for _ in range(3)]
        if i % 7 == 0:
            when["user_says_all_groups"] = [phrases[:2], [rnd.choice(WORDS)]]
        else:
            when["user_says_any"] = phrases
        if i % 5 == 0:
            when[rnd.choice(BOOLS)] = rnd.random() < 0.5
        rule: dict[str, Any] = {
            "id": f"rule{i}",
            "when": when,
            "forbid": [f"sub{rnd.randint(0, 30)}"],
            "reason": f"reason {i}",
        }
        if i % 3 == 0:
            rule["prefer"] = f"route{rnd.randint(0, 11)}"
        if i % 11 == 0:
            rule["route_order"] = [f"route{j}" for j in rnd.sample(range(12), 3)]
        if i % 4 == 0:
            rule["elicit"] = ["mode"]
        if i % 6 == 0:
            rule["after_success"] = [f"close{rnd.randint(0, 5)}"]
        rules.append(rule)
    return {
        "schema": "skillspec/v0",
        "id": "bench.decide",
        "title": "Decide benchmark",
        "description": "Generated 200-rule spec.",
        "routes": routes,
        "rules": rules,
        "elicitations": {
            "mode": {
                "question": "Which mode?",
                "choices": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
            }
        },
        "closures": {f"close{i}": {"description": "closure"} for i in range(6)},
        "tests": [{"name": "smoke", "input": "browse", "expect": {"not_forbid": ["nothing"]}}],
    }


def make_inputs(n: int, seed: int = 11) -> list[str]:
    """``n`` inputs of three spec words and five fillers (the same for the same ``n`` and seed)."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        words = rnd.sample(WORDS, 3) + rnd.sample(FILLER, 5)
        rnd.shuffle(words)
        out.append(" ".join(words).capitalize() + rnd.choice(("", "?", ".", " every day")))
    return out


def naive_matched(data: dict[str, Any], text: str) -> list[str]:
    """Baseline: a regex compiled per phrase per call (no precompilation, no index)."""
    low = text.lower()
    matched = []
    for rule in data["rules"]:
        when = rule["when"]
        ok = True
        if "user_says_any" in when:
            ok = any(
                re.compile(r"(?<![a-z0-9_])" + re.escape(p) + r"s?(?![a-z0-9_])").search(low)
                for p in when["user_says_any"]
            )
        for group in when.get("user_says_all_groups", []):
            ok = ok and any(
                re.compile(r"(?<![a-z0-9_])" + re.escape(p) + r"s?(?![a-z0-9_])").search(low)
                for p in group
            )
        if ok:
            matched.append(rule["id"])
    return matched


def _rate(fn: Any, inputs: list[str], rounds: int) -> float:
    """Best of ``rounds`` passes over ``inputs``: the machine is shared, the best is the code."""
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        for text in inputs:
            fn(text)
        best = max(best, len(inputs) / (time.perf_counter() - start))
    return best


#: A Python JSON echo of the same lines: the floor of any Python line processor (issue 21).
ECHO = (
    "import json, sys\nout = sys.stdout\nfor line in sys.stdin:\n"
    "    out.write(json.dumps(json.loads(line), ensure_ascii=False) + '\\n')\n"
)
REPEATS = 3


def _whole(tmp: Path, spec: Path, corpus: dict[str, Path]) -> dict[str, list[Any]]:
    """Each corpus through the command and through the echo, interleaved, ``REPEATS`` times."""
    from tests.benchmarks import _wholecmd as cmd

    decide_cmd = [cmd.script("skillspec"), "decide", str(spec), "--inputs"]
    runs: dict[str, list[Any]] = {}
    for _ in range(REPEATS):
        for name, lines in corpus.items():
            for kind, argv, stdin in (
                ("echo", [sys.executable, "-c", ECHO], lines),
                ("decide", [*decide_cmd, str(lines), "--json"], None),
            ):
                key = f"{kind}:{name}"
                runs.setdefault(key, []).append(cmd.run(argv, tmp / f"{key}.out", stdin=stdin))
    return runs


def _in_process(spec: Path, texts: list[str]) -> tuple[float, list[str]]:
    """Seconds for load + compile + every line in this process (the figure beside the command).

    The lines are made as the command makes them: a chunk of inputs at a time.
    """
    from engine.cli.cmd_spec_decide import CHUNK
    from engine.skillspec.batch import BatchDecider
    from engine.skillspec.load import load_decidable

    start = time.perf_counter()
    loaded = load_decidable(spec)
    assert loaded.compiled is not None
    lines_of = BatchDecider(loaded.compiled).lines_of
    lines = [
        line for at in range(0, len(texts), CHUNK) for line in lines_of(texts[at : at + CHUNK])
    ]
    return time.perf_counter() - start, lines


def batch_rows(quick: bool, data: dict[str, Any]) -> list[Row]:
    """Whole-command batch decide beside a JSON echo of the same lines, in the same run."""
    from tests.benchmarks import _wholecmd as cmd

    cmd.compile_tree()
    n_batch = 5000 if quick else 20000
    out: list[Row] = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        spec = tmp / "skill.spec.yml"
        spec.write_text(json.dumps(data, indent=1), encoding="utf-8")
        base = make_inputs(n_batch // 10)
        texts = {
            # This benchmark's corpus since issue 12: 2,000 inputs, each ten times.
            "repeated": (base * (n_batch // len(base) + 1))[:n_batch],
            # Every input different: nothing a batch may remember helps.
            "distinct": make_inputs(n_batch, seed=29),
        }
        corpus = {}
        for label, lines in texts.items():
            corpus[label] = tmp / f"{label}.jsonl"
            corpus[label].write_text("".join(json.dumps(t) + "\n" for t in lines), "utf-8")
        runs = _whole(tmp, spec, corpus)
        for label, lines in texts.items():
            echo, decided = cmd.median(runs[f"echo:{label}"]), runs[f"decide:{label}"]
            best = cmd.median(decided)
            secs, expected = _in_process(spec, lines)
            same = best.out.read_text(encoding="utf-8").splitlines() == expected
            out.append(
                Row(
                    f"skillspec decide --inputs, {n_batch} {label} lines, whole command",
                    n_batch / best.secs,
                    "dec/s",
                    target=0.5 * n_batch / echo.secs,
                    baseline=n_batch / echo.secs,
                    note=f"{best.secs:.3f}s (runs: {cmd.spread(decided)} s, CPU"
                    f" {cmd.cpu_median(decided):.3f}s) against a Python JSON echo of the same"
                    f" lines (load+dump per line) {echo.secs:.3f}s (runs:"
                    f" {cmd.spread(runs[f'echo:{label}'])} s); in process: {secs:.3f}s"
                    f" ({n_batch / secs:,.0f}/s, load and compile included); output equals the"
                    f" in-process lines: {same}; target = 0.5x the echo; {cmd.load_note()}",
                )
            )
    return out


def run(quick: bool) -> list[Row]:
    data = make_spec()
    inputs = make_inputs(500 if quick else 2000)
    compiled = compile_spec(data)
    rounds = 2 if quick else 5
    api = _rate(lambda t: decide(compiled, t), inputs, rounds)
    api_json = _rate(lambda t: decision_json_line(decide(compiled, t)), inputs, rounds)
    per_input = sum(len(decide(compiled, t).matched_rules) for t in inputs) / len(inputs)
    naive = _rate(lambda t: naive_matched(data, t), inputs[:200], rounds)
    rows = [
        Row(
            "skillspec decide: in-process API, 200 rules",
            api,
            "dec/s",
            target=20000,
            baseline=naive,
            note="baseline: naive per-call regex matcher, same process; "
            f"{per_input:.1f} rules match per input (a heavy mix)",
        ),
        Row(
            "skillspec decide: API + JSON line encode",
            api_json,
            "dec/s",
            target=20000,
            baseline=naive,
        ),
        Row("skillspec decide: naive regex baseline", naive, "dec/s"),
    ]
    rows.extend(batch_rows(quick, data))
    return rows


if __name__ == "__main__":
    from tests.benchmarks._common import print_table

    print_table(run(quick="--quick" in sys.argv))
