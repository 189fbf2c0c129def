"""``skillspec decide | explain | test | trace compact | trace align``.

Each handler loads the spec once through the checker (a spec that does not
validate is refused with its errors, exit 1, as the reference's loader does,
file checks included), compiles it once, and then runs the shared decide code.
Output is JSON where the reference prints JSON (decide, trace compact) and a
readable report otherwise, with ``--json`` for machines everywhere.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from engine.cli.common import EXIT_FAILED, EXIT_OK, print_json
from engine.errors import Diagnostic, InputError, Location

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

    from engine.skillspec.decide import CompiledSpec

MAX_INPUTS_BYTES = 256 * 1024 * 1024
#: Inputs decided (and decision lines written) at a time by ``decide --inputs``.
CHUNK = 256


def test_arguments(p: argparse.ArgumentParser) -> None:
    from engine.cli.cmd_spec_check import spec_arguments  # parser only: not on the fast path

    spec_arguments(p)
    p.add_argument(
        "--coverage", action="store_true", help="report rules and routes no scenario test reaches"
    )


def decide_arguments(p: argparse.ArgumentParser) -> None:
    from engine.cli.cmd_spec_check import spec_arguments  # parser only: not on the fast path

    spec_arguments(p)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--input", metavar="TEXT", help="the user input to decide")
    group.add_argument(
        "--inputs", metavar="FILE", help="one JSON string per line in, one decision per line out"
    )
    p.add_argument("--trace-dir", metavar="DIR", help="write a decision trace under DIR")


def explain_arguments(p: argparse.ArgumentParser) -> None:
    from engine.cli.cmd_spec_check import spec_arguments  # parser only: not on the fast path

    spec_arguments(p)
    p.add_argument("--input", metavar="TEXT", required=True, help="the user input to explain")
    p.add_argument("--trace-dir", metavar="DIR", help="write a decision trace under DIR")


def compact_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def align_arguments(p: argparse.ArgumentParser) -> None:
    from engine.cli.cmd_spec_check import spec_arguments  # parser only: not on the fast path

    spec_arguments(p)
    p.add_argument("--decision-trace", metavar="RUN_DIR", required=True)
    p.add_argument("--summary", action="store_true", help="print only the summary")


class LoadedSpec:
    """A validated, compiled spec and what traces need to know about its source."""

    def __init__(self, path: Path, compiled: CompiledSpec, data: Any) -> None:
        self.path = path
        self.compiled = compiled
        self.data = data
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            from engine.skillspec.load import spec_fingerprint

            try:
                self._fingerprint = spec_fingerprint(self.path)
            except OSError as exc:  # the spec vanished between loading and tracing
                raise InputError(f"{self.path}: cannot read: {exc.strerror or exc}") from exc
        return self._fingerprint


def _decidable(spec: str) -> LoadedSpec:
    """The spec argument, validated and compiled (:func:`spec_for_deciding` says why not)."""
    from engine.skillspec.load import spec_for_deciding

    loaded = spec_for_deciding(spec)
    assert loaded.compiled is not None  # spec_for_deciding refuses what it cannot compile
    return LoadedSpec(Path(spec), loaded.compiled, loaded.report.data)


def _require_trace(loaded: LoadedSpec, trace_dir: str | None) -> None:
    if loaded.compiled.trace_required and not trace_dir:
        raise InputError(
            f"{loaded.path}: trace.required is true; pass --trace-dir DIR (or use a spec that "
            "does not require tracing)",
            title="Trace required",
        )


def _write_trace(loaded: LoadedSpec, trace_dir: str, text: str) -> None:
    from engine.skillspec.decide import decide
    from engine.skillspec.trace import write_decision_trace

    decision = decide(loaded.compiled, text, events=True)
    result = write_decision_trace(trace_dir, loaded.compiled, decision, loaded.fingerprint)
    sys.stderr.write(
        f"trace: wrote {result.event_count} event(s) to {result.run_dir}\n"
        f"trace: jsonl {result.trace_jsonl}\ntrace: summary {result.summary_json}\n"
    )


def read_inputs(source: str) -> list[str]:
    """Parse an ``--inputs`` file: every line must be one JSON string."""
    try:
        if source == "-":
            raw = sys.stdin.buffer.read(MAX_INPUTS_BYTES + 1)
        else:
            with open(source, "rb") as fh:
                raw = fh.read(MAX_INPUTS_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    if len(raw) > MAX_INPUTS_BYTES:
        raise InputError(f"{source}: larger than {MAX_INPUTS_BYTES // (1024 * 1024)} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise _line_error(source, line, 0, "not valid UTF-8") from exc
    fast = _plain_lines(raw, text)
    if fast is None:
        fast = _string_lines(text)
    if fast is not None:
        return fast
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline
    from engine.jsontext import JsonTextError, loads

    out: list[str] = []
    for n, line in enumerate(lines, 1):
        try:
            value = loads(line)
        except JsonTextError as exc:
            raise _line_error(source, n, exc.col, exc.message) from None
        if not isinstance(value, str):
            raise _line_error(source, n, 1, f"expected a JSON string, got {type(value).__name__}")
        out.append(value)
    return out


#: Translating a file's bytes keeps only quotes, newlines, backslashes and control characters.
_SKELETON = bytes(set(range(0x20, 0x100)) - {ord('"'), ord("\\")})


def _plain_lines(raw: bytes, text: str) -> list[str] | None:
    """Every line's string when each line of ``text`` is a JSON string with no escape (else None).

    The usual file (inputs written by ``json.dumps``, ASCII or not): a
    line's string is then what lies between its quotes, so all the strings
    are cut out of the text with one ``split``, not read a line at a time.
    That holds when, of ``raw`` (the text's UTF-8 bytes), the quotes,
    newlines, backslashes and control characters are two quotes and a
    newline per line (none in a string: JSON refuses a raw control
    character, and a backslash starts an escape), and the text cut at each
    ``"\\n"`` gives as many strings as there are lines: then every quote
    and newline stands in one of those or at the text's ends. Anything else
    goes to :func:`_string_lines`, which reads every JSON string as
    ``json.loads`` does.
    """
    body = text[:-1] if text.endswith("\n") else text
    if len(body) < 2 or body[0] != '"' or body[-1] != '"':
        return None
    values = body[1:-1].split('"\n"')
    count = len(values)
    line = b'""\n'
    expected = line * count if len(body) < len(text) else line * (count - 1) + b'""'
    if raw.translate(None, _SKELETON) != expected:
        return None
    return values


def _string_lines(text: str) -> list[str] | None:
    """Every line's string when each line of ``text`` is exactly one JSON string (else None).

    The usual file: each line is read, where it lies in the text (no line
    is cut out first), by the C string scanner ``json.loads`` itself uses,
    and must end where its string ends: at a newline, or at the end of the
    text less one final newline. (A string cannot run past its line: JSON
    refuses a raw newline in one.) Anything else, even one line, goes the
    line-by-line way, which names the first bad line exactly as before.
    """
    from _json import scanstring  # the C scanner json.loads reads strings with

    if not text:
        return []
    size = len(text) - 1 if text[-1] == "\n" else len(text)
    out: list[str] = []
    append = out.append
    at = 0
    try:
        while at < size and text[at] == '"':
            value, end = scanstring(text, at + 1)
            append(value)
            if end == size:
                return out
            if text[end] != "\n":
                return None
            at = end + 1
    except ValueError:
        return None
    return None  # an empty line, or one that does not start with a quote


def _line_error(source: str, line: int, col: int, message: str) -> InputError:
    diag = Diagnostic(
        f'{message}; each line must be one JSON string such as "open the repo"',
        Location(source, line, col),
    )
    return InputError(str(diag), title="Bad --inputs line", diagnostics=[diag])


def cmd_decide(args: argparse.Namespace) -> int:
    loaded = _decidable(args.spec)
    _require_trace(loaded, args.trace_dir)
    compiled = loaded.compiled
    if args.inputs is not None:
        texts = read_inputs(args.inputs)
        if args.trace_dir:
            for text in texts:
                _write_trace(loaded, args.trace_dir, text)
        from engine.skillspec.batch import BatchDecider

        # Lines hold no reference cycles; pausing the cycle collector while
        # thousands are made saves work. Output goes out a chunk at a time,
        # small enough that its text and bytes stay in the CPU's cache (4,096
        # lines of a kilobyte took a fifth more time, most of it writing).
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            lines_of = BatchDecider(compiled).lines_of
            write = _chunk_writer()
            for start in range(0, len(texts), CHUNK):
                lines = lines_of(texts[start : start + CHUNK])
                lines.append("")  # the last line's newline, without copying the chunk again
                write("\n".join(lines))
        finally:
            if was_enabled:
                gc.enable()
        return EXIT_OK
    if args.trace_dir:
        _write_trace(loaded, args.trace_dir, args.input)
    from engine.skillspec.decide import decide

    print_json(decide(compiled, args.input).to_json())
    return EXIT_OK


def _chunk_writer() -> Callable[[str], None]:
    """Writes text to stdout with lone surrogates escaped (see :mod:`engine.jsontext`).

    A UTF-8 stdout gets bytes: encoding is the surrogate check (one can only
    come from an input, and encoding refuses it), so the text is not searched
    first and the text layer does not encode it again.
    """
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    encoding = (getattr(out, "encoding", "") or "").lower().replace("-", "")
    if buffer is None or encoding != "utf8":
        from engine.jsontext import escape_surrogates

        def write_text(text: str) -> None:
            out.write(escape_surrogates(text))

        return write_text
    out.flush()

    def write(text: str) -> None:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, from an input (json is loaded only then)
            from engine.jsontext import escape_surrogates

            data = escape_surrogates(text).encode("utf-8")
        buffer.write(data)

    return write


def cmd_explain(args: argparse.Namespace) -> int:
    from engine.skillspec.spec_explain import explain, render_explanation

    loaded = _decidable(args.spec)
    _require_trace(loaded, args.trace_dir)
    if args.trace_dir:
        _write_trace(loaded, args.trace_dir, args.input)
    exp = explain(loaded.compiled, args.input)
    if args.json:
        print_json(exp.to_json())
    else:
        sys.stdout.write(render_explanation(exp) + "\n")
    return EXIT_OK


def cmd_test(args: argparse.Namespace) -> int:
    from engine.skillspec.scenarios import coverage, render_coverage, render_run, run_tests

    loaded = _decidable(args.spec)
    run = run_tests(loaded.compiled)
    cov = coverage(loaded.compiled, run) if args.coverage else None
    if args.json:
        out = run.to_json()
        if cov is not None:
            out["coverage"] = cov.to_json()
        print_json(out)
    else:
        sys.stdout.write(render_run(run, f"skillspec test {args.spec}") + "\n")
        if cov is not None:
            sys.stdout.write(render_coverage(cov) + "\n")
    return EXIT_OK if run.ok else EXIT_FAILED


def cmd_trace_compact(args: argparse.Namespace) -> int:
    from engine.skillspec.trace import compact

    result = compact(args.run_dir)
    print_json(result.to_json())
    return EXIT_OK


def cmd_trace_align(args: argparse.Namespace) -> int:
    from engine.skillspec.align import align, render_report, render_summary

    loaded = _decidable(args.spec)
    report = align(loaded.compiled, str(args.spec), loaded.fingerprint, args.decision_trace)
    sys.stderr.write(f"alignment: wrote {Path(args.decision_trace) / 'alignment.json'}\n")
    if args.json:
        print_json(report.to_json())
    elif args.summary:
        sys.stdout.write(render_summary(report) + "\n")
    else:
        sys.stdout.write(render_report(report) + "\n")
    return EXIT_OK if report.ok else EXIT_FAILED
