"""The Decide pane's model: load a spec, decide as you type, save a scenario test.

Saving a scenario appends text to the spec file instead of re-dumping the YAML,
so the author's comments, quoting and key order survive; the new text is
checked (parsed, compiled, and the new test must pass) before the file is
replaced, and the replace is atomic, so a failed save never leaves a broken spec.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import Diagnostic, InputError
from engine.skillspec.decide import CompiledSpec, Decision, compile_spec
from engine.skillspec.load import spec_for_deciding
from engine.skillspec.scenarios import TestRun, run_tests
from engine.skillspec.spec_explain import RuleExplanation, explain
from engine.yamlsrc import LocDict, LocList, parse_yaml

_EXPECT_LISTS = ("matched_rules", "forbid", "elicit", "after_success")


@dataclass(frozen=True)
class LoadedSpec:
    """A spec compiled for deciding, with the text it came from."""

    path: Path
    text: str
    compiled: CompiledSpec

    @property
    def version(self) -> str:
        """A short digest of the text decided with, shown beside every result (``…``: cut)."""
        import hashlib

        return "sha256:" + hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:12] + "…"


@dataclass(frozen=True)
class DecideResult:
    """One input decided: the decision and every rule, matched or not, with why."""

    decision: Decision
    rules: tuple[RuleExplanation, ...]
    route_choice: str


def load_spec(path: str | Path) -> LoadedSpec:
    """Load ``path`` for deciding as the CLI does (:func:`spec_for_deciding`, its one refusal).

    A spec that does not validate is refused with its located errors
    (file:line:col), the same ones ``skillspec check`` prints; a path that is
    not a readable file is refused as "not found", not as an invalid spec.
    """
    loaded = spec_for_deciding(path)
    assert loaded.compiled is not None  # spec_for_deciding refuses what it cannot compile
    return LoadedSpec(Path(path), loaded.report.text, loaded.compiled)


def try_input(spec: LoadedSpec, text: str) -> DecideResult:
    exp = explain(spec.compiled, text)
    return DecideResult(exp.decision, exp.rules, exp.route_choice)


def scenario_results(spec: LoadedSpec) -> TestRun:
    return run_tests(spec.compiled)


def scenario_text(name: str, decision: Decision, indent: str = "  ") -> str:
    """A YAML block for one scenario test; strings are JSON-quoted (valid YAML 1.2)."""

    def q(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = [f"{indent}- name: {q(name)}", f"{indent}  input: {q(decision.input)}"]
    lines.append(f"{indent}  expect:")
    if decision.route is not None:
        lines.append(f"{indent}    route: {q(decision.route)}")
    for key in _EXPECT_LISTS:
        values = (
            list(decision.matched_rule_ids) if key == "matched_rules" else getattr(decision, key)
        )
        if values:
            lines.append(f"{indent}    {key}:")
            lines.extend(f"{indent}      - {q(str(v))}" for v in values)
    if len(lines) == 3:
        lines[2] = f"{indent}  expect: {{}}"
    return "\n".join(lines) + "\n"


def _insert_point(text: str, data: LocDict) -> tuple[int, str, bool]:
    """Line index to insert before, the item indent, and whether ``tests:`` must be added."""
    lines = text.splitlines(keepends=True)
    tests = data.get("tests")
    if "tests" not in data or tests is None:
        return len(lines), "  ", True
    if not isinstance(tests, LocList):
        where = data.where("tests")
        raise InputError(
            f"{where}: `tests` is not a list",
            title="Cannot save scenario",
            diagnostics=[Diagnostic("`tests` is not a list", where, path="tests")],
        )
    key_line = data.where("tests").line
    if tests and tests.pos.line == key_line:
        where = tests.pos
        msg = "`tests` is a flow sequence ([...]); write it as a block list to append to it"
        raise InputError(
            f"{where}: {msg}",
            title="Cannot save scenario",
            diagnostics=[Diagnostic(msg, where, path="tests")],
        )
    if not tests and "[" in lines[key_line - 1]:
        msg = "`tests: []` is a flow sequence; write `tests:` to append to it"
        raise InputError(msg, title="Cannot save scenario")
    later = [line for line in (data.where(key).line for key in data) if line > key_line]
    end = (min(later) - 1) if later else len(lines)  # 1-based last line of the block
    while end > key_line and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    indent = "  "
    if tests:
        first = lines[tests.where(0).line - 1]
        indent = first[: len(first) - len(first.lstrip())]
    return end, indent, False


@dataclass(frozen=True)
class ScenarioSave:
    """A checked scenario append, not yet written: the new text and its diff to show first."""

    path: Path
    old_text: str
    new_text: str
    compiled: CompiledSpec

    @property
    def diff(self) -> str:
        """A unified diff of the file (what the operator confirms before anything is written)."""
        return "".join(
            difflib.unified_diff(
                self.old_text.splitlines(keepends=True),
                self.new_text.splitlines(keepends=True),
                fromfile=str(self.path),
                tofile=str(self.path),
                n=2,
            )
        )


def append_scenario(spec: LoadedSpec, name: str, decision: Decision) -> LoadedSpec:
    """Append a scenario test for ``decision`` to the spec file; return the reloaded spec."""
    return write_scenario(spec, prepare_scenario(spec, name, decision))


def write_scenario(spec: LoadedSpec, save: ScenarioSave) -> LoadedSpec:
    """Write a prepared append atomically, unless the file changed since it was prepared."""
    if save.path.read_text(encoding="utf-8") != save.old_text:
        raise InputError(
            f"{save.path}: changed on disk since it was loaded; reload and try again",
            title="Cannot save scenario",
        )
    _atomic_write(save.path, save.new_text)
    return LoadedSpec(spec.path, save.new_text, save.compiled)


def prepare_scenario(spec: LoadedSpec, name: str, decision: Decision) -> ScenarioSave:
    """Check a scenario test for ``decision`` appended to the spec; nothing is written.

    Refuses (InputError) when the file changed on disk since it was loaded, when
    the result would not parse or compile, or when the new test would not pass.
    """
    current = spec.path.read_text(encoding="utf-8")
    if current != spec.text:
        raise InputError(
            f"{spec.path}: changed on disk since it was loaded; reload and try again",
            title="Cannot save scenario",
        )
    if not name.strip():
        raise InputError("a scenario test needs a name", title="Cannot save scenario")
    data = parse_yaml(current, str(spec.path)).data
    if not isinstance(data, LocDict):
        raise InputError(f"{spec.path}: a spec must be a mapping", title="Cannot save scenario")
    at, indent, add_key = _insert_point(current, data)
    lines = current.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    block = scenario_text(name.strip(), decision, indent)
    if add_key:
        block = "tests:\n" + block
    new_text = "".join(lines[:at]) + block + "".join(lines[at:])
    doc = parse_yaml(new_text, str(spec.path))
    if not isinstance(doc.data, Mapping):
        raise InputError("the saved spec would not be a mapping", title="Cannot save scenario")
    compiled = compile_spec(doc.data)
    run = run_tests(compiled)
    mine = [r for r in run.results if r.name == name.strip() and r.input == decision.input]
    if not mine or not mine[-1].passed:
        raise InputError(
            "the new scenario test would not pass against the spec; not saved",
            title="Cannot save scenario",
        )
    return ScenarioSave(spec.path, current, new_text, compiled)


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def decision_summary(decision: Decision) -> dict[str, Any]:
    """The pinned ``decide --json`` object (what the pane renders)."""
    return decision.to_json()
