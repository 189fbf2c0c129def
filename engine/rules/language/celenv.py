"""The CEL environment rules compile in, and the runner that evaluates them.

Why protobuf messages for ``event``: cel-expr-python type-checks field access
only against declared message types. One message per kind, built at runtime
in a private descriptor pool with proto3 *optional* fields, gives exactly the
DESIGN.md semantics: an undeclared field is a compile error, an absent value
reads ``""``/``0`` and ``has(event.f)`` is false for it. Building the message
costs well under a microsecond with the upb backend (measured), cheaper than
any workaround.

Why the primitives are bound at environment creation: passing functions per
Activation rebuilds the function registry on every call. Instead each
primitive's Python implementation reads the *current* evaluation's host,
budget and call log from a thread-local context that :func:`make_runner`'s
runner installs around ``eval``. One compiled program thus serves any number
of evaluations, on any number of threads.

Why the runner does not evaluate the program the user's text compiled to:
cel-expr-python leaks every argument it converts for a Python function, so
:mod:`engine.rules.language.celexec` rewrites each primitive call into a
zero-argument call whose Python side rebuilds the arguments (see there).
The user's program is still what is type-checked, validated and hashed.
"""

from __future__ import annotations

import datetime as _dt
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from engine.rules.language.celast import AstDecodeError, decode_checked
from engine.rules.language.celexec import SitePlan, plan_sites, program_roots, rewrite_checked
from engine.rules.language.model import (
    KINDS,
    MAX_PRIMITIVE_CALLS,
    PRIMITIVE_COST,
    SATURATION,
    CallRecord,
    EvalResult,
    PrimitiveHost,
    Runner,
)

_PACKAGE = "harness.rules"
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
COST_EXCEEDED = "cost limit exceeded"


def message_name(kind: str) -> str:
    """The CEL type name of ``event`` for ``kind`` (e.g. ``harness.rules.RunEvent``)."""
    return f"{_PACKAGE}.{''.join(p.capitalize() for p in kind.split('_'))}"


def _build_pool() -> tuple[Any, dict[str, Any]]:
    fdp = descriptor_pb2.FileDescriptorProto(
        name="harness_rules_events.proto", package=_PACKAGE, syntax="proto3"
    )
    for kind, fields in KINDS.items():
        msg = fdp.message_type.add(name=message_name(kind).rsplit(".", 1)[1])
        for i, (fname, ftype) in enumerate(fields):
            proto_type = (
                descriptor_pb2.FieldDescriptorProto.TYPE_INT64
                if ftype == "int"
                else descriptor_pb2.FieldDescriptorProto.TYPE_STRING
            )
            msg.oneof_decl.add(name=f"_{fname}")
            msg.field.add(
                name=fname,
                number=i + 1,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                type=proto_type,
                proto3_optional=True,
                oneof_index=i,
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    classes = {
        kind: message_factory.GetMessageClass(pool.FindMessageTypeByName(message_name(kind)))
        for kind in KINDS
    }
    return pool, classes


class _Ctx(threading.local):
    """Per-thread state of the evaluation in progress (see module docstring)."""

    def __init__(self) -> None:
        self.host: PrimitiveHost | None = None
        self.calls: list[CallRecord] = []
        self.cost = 0
        self.limit = 0
        self.exceeded = False
        self.sites: tuple[Callable[[], int | bool], ...] = ()
        self.event: Mapping[str, object] = {}
        self.data: dict[str, Any] = {}


_CTX = _Ctx()


class _Abort(Exception):
    """Raised inside a primitive to stop the evaluation (budget, no host)."""


def _window_ms(win: _dt.timedelta) -> int:
    return win.days * 86_400_000 + win.seconds * 1000 + win.microseconds // 1000


def _charge() -> PrimitiveHost:
    ctx = _CTX
    ctx.cost += PRIMITIVE_COST
    if ctx.cost > ctx.limit:
        ctx.exceeded = True
        raise _Abort(COST_EXCEEDED)
    if ctx.host is None:
        raise _Abort("no primitive host bound")
    return ctx.host


def _sel(selector: Mapping[str, str]) -> dict[str, str]:
    return {str(k): str(v) for k, v in selector.items()}


def _count(selector: Mapping[str, str], window: _dt.timedelta) -> int:
    host = _charge()
    sel, win = _sel(selector), _window_ms(window)
    result = min(int(host.count(sel, win)), SATURATION)
    _CTX.calls.append(CallRecord("count", None, tuple(sorted(sel.items())), win, result))
    return result


def _distinct(fieldname: str, selector: Mapping[str, str], window: _dt.timedelta) -> int:
    host = _charge()
    sel, win = _sel(selector), _window_ms(window)
    result = min(int(host.distinct(fieldname, sel, win)), SATURATION)
    _CTX.calls.append(CallRecord("distinct", fieldname, tuple(sorted(sel.items())), win, result))
    return result


def _exists(selector: Mapping[str, str], window: _dt.timedelta) -> bool:
    host = _charge()
    sel, win = _sel(selector), _window_ms(window)
    result = bool(host.exists(sel, win))
    _CTX.calls.append(CallRecord("exists", None, tuple(sorted(sel.items())), win, result))
    return result


def _function_decls() -> list[Any]:
    t = cel.Type
    smap = t.Map(t.STRING, t.STRING)
    return [
        cel.FunctionDecl(
            "count", [cel.Overload("count_map_duration", t.INT, [smap, t.DURATION], impl=_count)]
        ),
        cel.FunctionDecl(
            "distinct",
            [
                cel.Overload(
                    "distinct_string_map_duration",
                    t.INT,
                    [t.STRING, smap, t.DURATION],
                    impl=_distinct,
                )
            ],
        ),
        cel.FunctionDecl(
            "exists",
            [cel.Overload("exists_map_duration", t.BOOL, [smap, t.DURATION], impl=_exists)],
        ),
    ]


def _zero_arg_decls() -> list[Any]:
    """``__prim_int_i()`` / ``__prim_bool_i()``: call site i of the rule being evaluated."""
    t = cel.Type
    out = []
    for i in range(MAX_PRIMITIVE_CALLS):

        def site(i: int = i) -> int | bool:
            return _CTX.sites[i]()

        for name, rtype in ((f"__prim_int_{i}", t.INT), (f"__prim_bool_{i}", t.BOOL)):
            out.append(cel.FunctionDecl(name, [cel.Overload(name, rtype, [], impl=site)]))
    return out


class _SubError(Exception):
    """A selector value (or other argument) program evaluated to an error."""


_ERROR_TYPE = cel.Type.ERROR


def _sub(program: Any, ctx: _Ctx) -> Any:
    """Run a cut-out argument program on the current row; an error value raises."""
    value = program.eval(data=ctx.data)
    if value.type() == _ERROR_TYPE:
        raise _SubError(_clean_runtime_error(str(value.value())))
    return value.plain_value()


def _make_site(plan: SitePlan, programs: Mapping[int, Any]) -> Callable[[], int | bool]:
    """The Python side of one rewritten call site: rebuild the arguments, then call.

    Arguments are built in CEL's order (field, selector entries, window), all
    before the budget is charged, as when CEL evaluated them before calling.
    """
    items: tuple[tuple[str, int, Any], ...] = tuple(
        (key, {"lit": 0, "row": 1}.get(tag, 2), programs[int(str(arg))] if tag == "prog" else arg)
        for key, (tag, arg) in plan.selector
    )
    fld = plan.field
    fld_prog = programs[int(str(fld[1]))] if fld is not None and fld[0] == "prog" else None
    fld_lit = str(fld[1]) if fld is not None and fld_prog is None else None
    win_prog = programs[int(str(plan.window[1]))]
    win_const: int | None = None
    if plan.window[0] == "const":
        try:
            value = win_prog.eval(data={})
            if value.type() != _ERROR_TYPE and isinstance(value.value(), _dt.timedelta):
                win_const = _window_ms(value.value())
        except Exception:  # evaluated per call instead, where an error surfaces properly
            win_const = None
    fn = plan.fn

    def site() -> int | bool:
        ctx = _CTX
        fieldname: Any = fld_lit if fld_prog is None else _sub(fld_prog, ctx)
        sel: dict[str, str] = {}
        for key, tag, arg in items:
            if tag == 0:
                sel[key] = arg
            elif tag == 1:
                v = ctx.event.get(arg)
                sel[key] = "" if v is None else str(v)
            else:
                sel[key] = str(_sub(arg, ctx))
        win = win_const if win_const is not None else _window_ms(_sub(win_prog, ctx))
        host = _charge()
        result: int | bool
        if fn == "count":
            result = min(int(host.count(sel, win)), SATURATION)
        elif fn == "distinct":
            result = min(int(host.distinct(fieldname, sel, win)), SATURATION)
        else:
            result = bool(host.exists(sel, win))
        ctx.calls.append(CallRecord(fn, fieldname, tuple(sorted(sel.items())), win, result))
        return result

    return site


@dataclass(frozen=True, slots=True)
class CelError:
    """One compile diagnostic from CEL: 1-based line/col within the ``when`` text."""

    line: int
    col: int
    message: str


_ERR = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*?)(?=\n \||\n?ERROR: |\Z)", re.S)


def parse_cel_errors(text: str) -> list[CelError]:
    """Split cel-expr-python's error text into located errors (caret lines dropped)."""
    out = []
    for m in _ERR.finditer(text):
        msg = m.group(3).strip()
        msg = re.sub(r"\s*\[INVALID_ARGUMENT\]$", "", msg)
        out.append(CelError(int(m.group(1)), int(m.group(2)), msg))
    if not out:
        cleaned = re.sub(r"^INVALID_ARGUMENT:\s*", "", text.strip())
        out.append(CelError(1, 1, cleaned.splitlines()[0] if cleaned else "invalid expression"))
    return out


class CelEnvironment:
    """One CEL env per journal kind, sharing the descriptor pool and the primitives."""

    def __init__(self) -> None:
        self._pool, self._classes = _build_pool()
        self._cache = _RowCache()
        decls = _function_decls()
        self._envs = {kind: self._new_env(kind, decls) for kind in KINDS}
        exec_decls = decls + _zero_arg_decls()
        self._exec_envs = {kind: self._new_env(kind, exec_decls) for kind in KINDS}

    def _new_env(self, kind: str, decls: list[Any]) -> Any:
        return cel.NewEnv(
            descriptor_pool=self._pool,
            variables={"event": cel.Type(message_name(kind)), "now": cel.Type.TIMESTAMP},
            functions=decls,
        )

    def execution_program(
        self, kind: str, expr: Any
    ) -> tuple[Any, tuple[Callable[[], int | bool], ...]]:
        """The leak-free program to run for ``expr`` and its call-site callbacks.

        Falls back to ``expr`` itself (whose primitives still work, leaking)
        when a call site has a shape the loader's checks would have refused.
        """
        try:
            raw = expr.serialize()
            plans = plan_sites(decode_checked(raw), kind)
            if not plans:
                return expr, ()
            calls = {p.node_id: p.name for p in plans}
            main, cuts = rewrite_checked(raw, calls, program_roots(plans))
            env = self._exec_envs[kind]
            program = env.deserialize(main)
            programs = {nid: env.deserialize(b) for nid, b in cuts.items()}
            return program, tuple(_make_site(p, programs) for p in plans)
        except (AstDecodeError, RuntimeError, KeyError, ValueError):
            return expr, ()

    def compile(self, kind: str, when: str) -> tuple[Any | None, list[CelError]]:
        """Compile and type-check; a result type other than bool is an error."""
        env = self._envs[kind]
        try:
            expr = env.compile(when)
        except RuntimeError as exc:
            return None, [self._friendly(kind, e) for e in parse_cel_errors(str(exc))]
        except Exception as exc:  # defensive: the binding may raise other types
            return None, [CelError(1, 1, f"cannot compile: {exc}")]
        rtype = expr.return_type()
        if rtype != cel.Type.BOOL:
            name = rtype.name() if hasattr(rtype, "name") else str(rtype)
            return None, [
                CelError(1, 1, f"`when` must be a bool expression, but its type is {name}")
            ]
        return expr, []

    @staticmethod
    def _friendly(kind: str, err: CelError) -> CelError:
        """Say "not a field of run_event events" rather than the generated type name."""
        m = re.match(r"undefined field '([^']*)' not found in struct '[^']*'", err.message)
        if not m:
            return err
        fields = ", ".join(f for f, _ in KINDS[kind])
        msg = f"undefined field '{m.group(1)}': not a field of {kind} events (fields: {fields})"
        return CelError(err.line, err.col, msg)

    def make_runner(
        self,
        kind: str,
        expr: Any,
        base_cost: int,
        cost_limit: int,
        guard: frozenset[str] | None = None,
    ) -> Runner:
        """A closure evaluating ``expr`` for one row (see :class:`EvalResult`).

        ``base_cost`` is the static cost of everything but the primitives; the
        runtime budget charges it up front, then 100 per primitive call.
        ``guard`` (see :func:`engine.rules.language.celast.type_guard`) lets rows of
        other types be rejected without entering CEL. The event message and
        ``now`` are cached per thread, keyed by the row's field values, so the
        rules of one kind evaluated on one row build them once.
        """
        fields = tuple(f for f, _ in KINDS[kind])
        program, sites = self.execution_program(kind, expr)
        cls = self._classes[kind]
        ctx = _CTX
        cache = self._cache
        epoch, delta = _EPOCH, _dt.timedelta
        no_match = EvalResult(False, (), base_cost, None)
        plain_match = EvalResult(True, (), base_cost, None)
        over_budget = EvalResult(False, (), base_cost, COST_EXCEEDED)
        guard_none_ok = guard is not None and "" in guard

        def run(event: Mapping[str, object], now_ms: int, host: PrimitiveHost) -> EvalResult:
            if guard is not None:
                etype = event.get("type")
                if etype not in guard and not (etype is None and guard_none_ok):
                    return no_match
            if base_cost > cost_limit:
                return over_budget
            values = (cls, *map(event.get, fields))
            if cache.key == values:
                msg = cache.msg
            else:
                try:
                    msg = cls(
                        **{f: v for f, v in zip(fields, values[1:], strict=True) if v is not None}
                    )
                except (TypeError, ValueError) as exc:
                    return EvalResult(False, (), 0, f"bad event row: {exc}")
                cache.key, cache.msg = values, msg
            if cache.now_ms != now_ms:
                cache.now_ms, cache.now = now_ms, epoch + delta(milliseconds=now_ms)
            data = {"event": msg, "now": cache.now}
            ctx.host, ctx.calls, ctx.cost, ctx.limit, ctx.exceeded = (
                host,
                [],
                base_cost,
                cost_limit,
                False,
            )
            if sites:  # only a rewritten program calls back into them
                ctx.sites, ctx.event, ctx.data = sites, event, data
            try:
                value = program.eval(data=data)
                calls = ctx.calls
                if ctx.exceeded:
                    return EvalResult(False, tuple(calls), ctx.cost, COST_EXCEEDED)
                result = value.value()
                if result is True:
                    return EvalResult(True, tuple(calls), ctx.cost, None) if calls else plain_match
                if result is False:
                    return EvalResult(False, tuple(calls), ctx.cost, None) if calls else no_match
                err = str(result) if result is not None else "no value"
                return EvalResult(False, tuple(calls), ctx.cost, _clean_runtime_error(err))
            except Exception as exc:  # a CEL runtime failure must not escape
                return EvalResult(False, tuple(ctx.calls), ctx.cost, f"evaluation failed: {exc}")
            finally:
                ctx.host = None

        return run


class _RowCache(threading.local):
    """Per-thread cache of the last row's event message and ``now``."""

    def __init__(self) -> None:
        self.key: object = None
        self.msg: Any = None
        self.now_ms: int | None = None
        self.now: _dt.datetime = _EPOCH


def _clean_runtime_error(text: str) -> str:
    return re.sub(r"^[A-Z_]+:\s*", "", text.strip()) or "evaluation error"


_DEFAULT: CelEnvironment | None = None
_LOCK = threading.Lock()


def default_environment() -> CelEnvironment:
    """The process-wide environment (built once; building costs a few ms)."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = CelEnvironment()
        return _DEFAULT
