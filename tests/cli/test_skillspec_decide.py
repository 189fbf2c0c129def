"""The ``skillspec`` decide / explain / test / trace commands, end to end in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.skillspec import main
from tests.conftest import REFERENCE, ROOT

SPEC = """\
schema: skillspec/v0
id: cli.demo
title: CLI demo
description: A small valid spec for CLI tests.
routes:
  - id: local
    label: Local
    rank: 10
  - id: browser
    label: Browser
    rank: 20
rules:
  - id: browse_rule
    when:
      user_says_any: [browse]
    prefer: browser
    forbid: [native_search_as_answer]
    elicit: [browser_mode]
    reason: Page evidence needs a browser.
  - id: untested_rule
    when:
      user_says_any: [deploy]
    forbid: [force_push]
elicitations:
  browser_mode:
    question: Which browser mode?
    choices:
      - id: headed
        label: Headed
      - id: headless
        label: Headless
tests:
  - name: browse uses browser
    input: browse the page
    expect:
      route: browser
      forbid_exact: [native_search_as_answer]
{extra_tests}{trace}"""


def write_spec(tmp_path: Path, *, failing: bool = False, trace: str = "") -> Path:
    extra = ""
    if failing:
        extra = (
            "  - name: wrong on purpose\n    input: hello there\n    expect:\n"
            "      route: browser\n      elicit: [browser_mode]\n"
        )
    path = tmp_path / "skill.spec.yml"
    path.write_text(SPEC.format(extra_tests=extra, trace=trace), encoding="utf-8")
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_decide_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path)
    code, out, _ = cli(capsys, "decide", str(spec), "--input", "Browse it", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["route"] == "browser" and data["elicit"] == ["browser_mode"]
    assert data["route_selection"]["basis"] == "rule_prefer"
    assert data["matched_rules"] == [
        {"id": "browse_rule", "reason": "Page evidence needs a browser."}
    ]


def test_decide_inputs_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('"browse it"\n"deploy now"\n"caf\\u00e9"\n', encoding="utf-8")
    code, out, _ = cli(capsys, "decide", str(spec), "--inputs", str(inputs), "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["input"] for r in rows] == ["browse it", "deploy now", "café"]
    assert [r["route"] for r in rows] == ["browser", "local", "local"]
    assert rows[1]["route_selection"]["basis"] == "default_route_order"
    assert rows[1]["forbid"] == ["force_push"]


@pytest.mark.parametrize(
    ("content", "line", "needle"),
    [
        ('"ok"\nnot json\n', 2, "not JSON"),
        ('"ok"\n"fine"\n42\n', 3, "expected a JSON string, got int"),
        ('"ok"\n\n"x"\n', 2, "not JSON"),
        ('["a"]\n', 1, "got list"),
    ],
)
def test_decide_inputs_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, line: int, needle: str
) -> None:
    spec = write_spec(tmp_path)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(content, encoding="utf-8")
    code, out, err = cli(capsys, "decide", str(spec), "--inputs", str(inputs), "--json")
    assert code == 2
    assert f"{inputs}:{line}:" in out + err and needle in out + err
    assert "Traceback" not in err


def test_decide_inputs_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path)
    inputs = tmp_path / "in.jsonl"
    inputs.write_bytes(b'"ok"\n"\xff"\n')
    code, _, err = cli(capsys, "decide", str(spec), "--inputs", str(inputs))
    assert code == 2 and f"{inputs}:2" in err and "UTF-8" in err


def test_trace_required_refuses_without_trace_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = (
        "trace:\n  mode: event_log\n  required: true\n"
        "  record: [input_received, rule_matched, outcome_recorded]\n"
    )
    spec = write_spec(tmp_path, trace=trace)
    for cmd in ("decide", "explain"):
        code, _, err = cli(capsys, cmd, str(spec), "--input", "browse")
        assert code == 2 and "trace.required" in err
    code, out, err = cli(
        capsys, "decide", str(spec), "--input", "browse", "--trace-dir", str(tmp_path / "tr")
    )
    assert code == 0 and "trace: wrote 3 event(s)" in err
    [run_dir] = list((tmp_path / "tr").iterdir())
    kinds = sorted(p.name.split(".")[1] for p in (run_dir / "events").iterdir())
    assert kinds == ["input_received", "outcome_recorded", "rule_matched"]
    code, out, _ = cli(capsys, "trace", "compact", str(run_dir))
    assert code == 0 and json.loads(out)["event_count"] == 3
    code, out, _ = cli(
        capsys, "trace", "align", str(spec), "--decision-trace", str(run_dir), "--summary"
    )
    assert code == 0 and "alignment: unproven" in out and "route: browser" in out


def test_trace_align_fails_on_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path)
    code, _, _ = cli(
        capsys, "decide", str(spec), "--input", "browse", "--trace-dir", str(tmp_path / "tr")
    )
    assert code == 0
    [run_dir] = list((tmp_path / "tr").iterdir())
    spec.write_text(spec.read_text().replace("prefer: browser", "prefer: local"))
    code, out, _ = cli(
        capsys, "trace", "align", str(spec), "--decision-trace", str(run_dir), "--json"
    )
    assert code == 1
    report = json.loads(out)
    assert report["status"] == "fail"
    failed = {c["id"] for c in report["checks"] if c["status"] == "fail"}
    assert {"route_selected", "spec_fingerprint"} <= failed


def test_explain_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path)
    code, out, _ = cli(capsys, "explain", str(spec), "--input", "browse then deploy")
    assert code == 0
    assert "[matched    ] browse_rule" in out and "[matched    ] untested_rule" in out
    assert "preferred by rule browse_rule" in out
    code, out, _ = cli(capsys, "explain", str(spec), "--input", "hello", "--json")
    data = json.loads(out)
    assert [r["matched"] for r in data["rules"]] == [False, False]
    assert data["decision"]["route_selection"]["basis"] == "default_route_order"


def test_test_command_exit_codes_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path)
    code, out, _ = cli(capsys, "test", str(spec))
    assert code == 0 and "1 passed, 0 failed" in out
    spec = write_spec(tmp_path, failing=True)
    code, out, _ = cli(capsys, "test", str(spec))
    assert code == 1
    assert "FAIL wrong on purpose" in out
    assert "route: expected route browser, got local" in out
    assert "elicit: expected elicit to include 'browser_mode'" in out
    code, out, _ = cli(capsys, "test", str(spec), "--json", "--coverage")
    data = json.loads(out)
    assert code == 1 and data["failed"] == 1
    assert data["coverage"]["rules_uncovered"] == ["untested_rule"]


def test_coverage_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path)
    code, out, _ = cli(capsys, "test", str(spec), "--coverage")
    assert code == 0
    assert "rule not matched by any test: untested_rule" in out
    assert "route not selected by any test: local" in out


def test_unloadable_spec_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("schema: skillspec/v0\nrules: [\n", encoding="utf-8")
    for argv in (["test", str(bad)], ["decide", str(bad), "--input", "x"]):
        code, _, err = cli(capsys, *argv)
        assert code in (1, 2) and str(bad) in err and "Traceback" not in err
    code, _, err = cli(capsys, "test", str(tmp_path / "missing.yml"))
    assert code == 2 and "no such file" in err


def test_corpus_spec_runs_in_a_separate_process_without_textual(tmp_path: Path) -> None:
    spec = REFERENCE / "examples" / "repo-readiness" / "skill.spec.yml"
    if not spec.is_file():
        pytest.skip("conformance corpus absent")
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("\n".join(json.dumps(f"check the repo {i}") for i in range(50)) + "\n")
    code = (
        "import sys; from engine.cli.skillspec import main; "
        f"rc = main(['decide', {str(spec)!r}, '--inputs', {str(inputs)!r}, '--json']); "
        "assert 'textual' not in sys.modules; sys.exit(rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 50


X_PREDICATE = """\
schema: skillspec/v0
id: x.pred
title: t
description: t
routes:
  - id: a
    label: A
rules:
  - id: r
    when:
      user_says_any: [go]
      x-mood: happy
    prefer: a
tests:
  - name: t
    input: go
    expect:
      route: a
"""

MISSING_RESOURCE = """\
schema: skillspec/v0
id: x.files
title: t
description: t
routes:
  - id: a
    label: A
resources:
  src:
    path: missing.md
    role: source_material
    used_by:
      - kind: route
        id: a
tests:
  - name: t
    input: go
    expect:
      route: a
"""


def test_x_predicate_is_refused_like_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "skill.spec.yml"
    spec.write_text(X_PREDICATE, encoding="utf-8")
    for argv in (["test", str(spec)], ["decide", str(spec), "--input", "go"]):
        code, out, err = cli(capsys, *argv)
        assert code == 1 and f"{spec}:12:7" in err and "x-mood" in err
        assert out == ""


def test_only_file_checks_failing_still_refuses_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the reference's test command loads the spec with file checks, so it refuses
    spec = tmp_path / "skill.spec.yml"
    spec.write_text(MISSING_RESOURCE, encoding="utf-8")
    code, out, err = cli(capsys, "test", str(spec))
    assert code == 1 and "missing.md" in err and "passed" not in out
    (tmp_path / "missing.md").write_text("# here\n", encoding="utf-8")
    code, out, _ = cli(capsys, "test", str(spec))
    assert code == 0 and "1 passed, 0 failed" in out


def test_decide_inputs_from_stdin_and_explain_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    spec = write_spec(tmp_path)
    stdin = io.TextIOWrapper(io.BytesIO(b'"browse"\n"deploy"\n'), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, _ = cli(capsys, "decide", str(spec), "--inputs", "-", "--json")
    assert code == 0
    assert [json.loads(line)["route"] for line in out.splitlines()] == ["browser", "local"]
    code, _, err = cli(
        capsys, "explain", str(spec), "--input", "browse", "--trace-dir", str(tmp_path / "t")
    )
    assert code == 0 and "trace: wrote" in err
    [run_dir] = list((tmp_path / "t").iterdir())
    assert (run_dir / "events" / "000001.input_received.json").is_file()


@pytest.mark.parametrize("case", ["missing", "directory", "invalid"])
def test_the_cli_and_the_console_refuse_a_spec_alike(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One spec-for-deciding function, one refusal type: same title and exit code in both."""
    from engine.skillspec.load import SpecRefused
    from engine.views.decide import load_spec as console_load

    good = write_spec(tmp_path)
    if case == "missing":
        spec, title, code_wanted = tmp_path / "nope.yml", "Spec not found", 2
    elif case == "directory":
        spec, title, code_wanted = tmp_path, "Spec not found", 2
    else:
        spec = tmp_path / "invalid.spec.yml"
        text = good.read_text(encoding="utf-8").replace("schema: skillspec/v0", "schema: nope/v9")
        assert text != good.read_text(encoding="utf-8")
        spec.write_text(text, encoding="utf-8")
        title, code_wanted = "Spec does not validate", 1
    with pytest.raises(SpecRefused) as refused:
        console_load(spec)
    assert refused.value.title == title and refused.value.exit_code == code_wanted
    if case == "invalid":  # located errors, file:line:col
        assert f"{spec.name}:1:" in str(refused.value)
    for argv in (["decide", str(spec), "--input", "x"], ["test", str(spec)]):
        code, _, err = cli(capsys, *argv)
        assert code == code_wanted and err.startswith(title), err
