"""Backtest: replay stored rows through the live evaluator, with fresh state, writing nothing.

Why it is trustworthy: it is not a second implementation. It builds the same
:class:`~engine.rules.evaluation.evaluator.RowEvaluator` the live evaluator uses, feeds
it the same rows in seq order (``now`` = each row's ``at``), and never lets a
primitive see a row after the one evaluated. Rows from before the range that
still fall inside the longest window are fed to the window index first (not
evaluated), exactly what the live evaluator's index held at that point.

Cost follows the rows a rule can match: only candidate rows are read (see
:mod:`engine.rules.language.prefilter`): rows some rule's proven condition admits, rows
the window index keeps, and rows of the kinds the fire hooks watch (ticks, for
holds). Any other row would be evaluated by no rule and counted by no
aggregate, so skipping it changes no fire. :mod:`engine.rules.evaluation.replay` chooses
how each aggregate is answered (the fed window index, or SQL on an index or on
a shape table, for selectors that would otherwise need every row fed) and
which rule gates SQL tests before a row is read; every choice gives the same
answers, so the same fires.

What it cannot do, and says so: results are on recorded history (after a
would-be hold the recorded history went on as it happened), and a rule about
something that never happened backtests silent.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from engine.rules.evaluation.backtest_json import fire_json, json_bytes, json_text, write_json
from engine.rules.evaluation.candidates import CandidatePlan, candidate_plan
from engine.rules.evaluation.evaluator import EvalHost, RowEvaluator, RuleError
from engine.rules.evaluation.fires import Fire
from engine.rules.evaluation.hook_rows import HookRows
from engine.rules.evaluation.hooks import DefaultHooks, FireHooks
from engine.rules.evaluation.pipeline import PipelinedCandidates, start_pipeline
from engine.rules.evaluation.ranges import SeqRange, resolve_range
from engine.rules.evaluation.replay import Mode, ReplayPlan, plan_replay
from engine.rules.evaluation.replay_loop import ReplayLoop, answer_primer
from engine.rules.evaluation.window import ROW_SELECT, WindowIndex
from engine.rules.language.model import CompiledRule
from engine.timefmt import day_ms, iso_ms

__all__ = [
    "BacktestResult",
    "Progress",
    "SeqRange",
    "candidate_plan_for",
    "resolve_range",
    "run_backtest",
]

ON_RECORDED_HISTORY = (
    "Results are on recorded history: after a would-be hold or stop the recorded "
    "history went on as it happened, so later fires may not have occurred."
)
SILENT_NOTE = (
    "A rule about something that never happened in this history backtests silent: "
    "no fires here is not evidence that the rule is right."
)
BATCH = 20_000


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a running backtest is (for a progress bar or the console)."""

    rows_done: int  # candidate rows read so far
    rows_total: int  # candidate rows in the range (every row when nothing is filtered)
    fires: int
    seq: int


@dataclass(frozen=True)
class BacktestResult:
    """Would-be fires over a range, with per-day counts, errors and the honest caveats."""

    rules: tuple[tuple[str, str], ...]  # (name, hash)
    range: SeqRange
    rows_scanned: int  # rows of the range read from the store (the prefilter's candidates)
    rows_evaluated: int  # rows where a rule was decided past its prefilter and gates
    fires: tuple[Fire, ...]
    rule_errors: tuple[RuleError, ...] = ()
    store_errors: int = 0
    cancelled: bool = False
    notes: tuple[str, ...] = (ON_RECORDED_HISTORY, SILENT_NOTE)
    extra: dict[str, Any] = field(default_factory=dict)

    def per_day(self) -> list[tuple[str, str, int]]:
        """(UTC date, rule, fires) sorted by date then rule."""
        counts = Counter((day_ms(f.at), f.rule) for f in self.fires)
        return sorted((d, r, n) for (d, r), n in counts.items())

    def per_rule(self) -> dict[str, int]:
        counts = Counter([f.rule for f in self.fires])
        return {name: counts.get(name, 0) for name, _ in self.rules}

    def silent_rules(self) -> list[str]:
        return [name for name, n in self.per_rule().items() if n == 0]

    def to_json(self) -> dict[str, Any]:
        return self._document([fire_json(f) for f in self.fires])

    def json_text(self) -> str:
        """``to_json()`` as ``print_json`` writes it (indent 2), built several times faster."""
        return json_text(self._document(None), self.fires)

    def json_bytes(self) -> bytes:
        """:meth:`json_text` as UTF-8, for writing straight to a binary stream."""
        return json_bytes(self._document(None), self.fires)

    def write_json(self, write: Callable[[bytes], object]) -> None:
        """:meth:`json_bytes` handed to ``write`` in pieces (never the whole report at once)."""
        write_json(self._document(None), self.fires, write)

    def _document(self, fires: list[dict[str, Any]] | None) -> dict[str, Any]:
        return {
            "on_recorded_history": True,
            "rules": [{"name": n, "hash": h} for n, h in self.rules],
            "range": {
                "first_seq": self.range.first_seq,
                "last_seq": self.range.last_seq,
                "rows": self.range.rows,
                "first_at": self.range.first_at,
                "last_at": self.range.last_at,
            },
            "rows_scanned": self.rows_scanned,
            "rows_evaluated": self.rows_evaluated,
            "cancelled": self.cancelled,
            "fires": fires,
            "per_rule": self.per_rule(),
            "per_day": [{"date": d, "rule": r, "fires": n} for d, r, n in self.per_day()],
            "silent_rules": self.silent_rules(),
            "rule_errors": [
                {"rule": e.rule, "seq": e.seq, "error": e.error} for e in self.rule_errors
            ],
            "store_errors": self.store_errors,
            "notes": list(self.notes),
            **self.extra,
        }

    def render_text(self, max_fires: int = 200) -> str:
        r = self.range
        lines = [
            "Backtest on recorded history",
            f"rows: seq {r.first_seq}..{r.last_seq} ({r.rows} rows"
            + (f", {iso_ms(r.first_at)} .. {iso_ms(r.last_at)})" if r.rows else ")")
            + (f"  CANCELLED after {self.rows_scanned} rows" if self.cancelled else ""),
            f"read {self.rows_scanned} candidate row(s), evaluated rules on {self.rows_evaluated}",
        ]
        if not r.rows:
            lines.append("  no journal rows in this range: nothing was evaluated")
        for name, count in self.per_rule().items():
            lines.append(f"  {name}: {count} would-be fire(s)")
        for e in self.rule_errors:
            lines.append(f"  {e.rule}: DISABLED at seq {e.seq}: {e.error}")
        if self.fires:
            lines.append("")
            lines.append(
                f"{'seq':>10}  {'time (UTC)':20}  {'rule':28} {'target':24} level  aggregates"
            )
            for f in self.fires[:max_fires]:
                aggs = ", ".join(f"{c.fn}={c.result}" for c in f.calls)
                level = (
                    f.level if f.effective_level == f.level else f"{f.level}->{f.effective_level}"
                )
                status = "" if f.status == "fired" else f" [{f.status}]"
                lines.append(
                    f"{f.seq:>10}  {iso_ms(f.at):20}  {f.rule:28} {f.target[:24]:24} "
                    f"{level}{status}  {aggs}"
                )
            if len(self.fires) > max_fires:
                lines.append(f"  … and {len(self.fires) - max_fires} more (use --json for all)")
            lines.append("")
            lines.append("per day:")
            for d, rule, n in self.per_day():
                lines.append(f"  {d}  {rule:28} {n}")
        if self.store_errors:
            lines.append(f"store errors: {self.store_errors} (rows excluded from the comparison)")
        lines.extend(_lifecycle_lines(self.extra.get("lifecycle")))
        lines.append("")
        silent = self.silent_rules()
        if silent:
            lines.append(f"silent: {', '.join(silent)}")
        lines.extend(self.notes)
        return "\n".join(lines)


def _lifecycle_lines(summary: Any) -> list[str]:
    """The lifecycle's part of a backtest (statuses, levels, shadow, hold spans), if it ran."""
    if not isinstance(summary, dict):
        return []
    lines = ["", "under today's config (shadow, cooldown, enforce list):"]
    for key, title in (("by_status", "status"), ("acting_levels", "would act at")):
        counts = summary.get(key) or {}
        if counts:
            lines.append(f"  {title}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for name, until in sorted((summary.get("shadow_until") or {}).items()):
        lines.append(f"  {name}: in shadow until {until}")
    spans = summary.get("hold_spans") or []
    for span in spans[:50]:
        end = span.get("end") or "still held at the end of the range"
        lines.append(
            f"  hold {span.get('rule')} on {span.get('harness')}: {span.get('start')} -> {end}"
            " (simulated from tick rows)"
        )
    if len(spans) > 50:
        lines.append(f"  … and {len(spans) - 50} more hold spans (use --json)")
    return lines


# -- the replay --------------------------------------------------------------------------


HostFactory = Callable[[Sequence[CompiledRule]], EvalHost]


def candidate_plan_for(
    rules: Sequence[CompiledRule],
    host: object,
    hooks: FireHooks,
    replay: ReplayPlan | None = None,
) -> CandidatePlan:
    """The rows a replay of ``rules`` must read (every row unless the host is the window index).

    Rows of the hooks' kinds are not among them when the hooks say when they
    are due: those are read on demand (see :mod:`engine.rules.evaluation.hook_rows`).
    """
    filters = host.feed_filters() if isinstance(host, WindowIndex) else None
    kinds = frozenset() if _on_demand_kinds(hooks) else hooks.row_kinds
    if replay is None:
        return candidate_plan(rules, filters, kinds)
    columns = tuple(sql for _, sql in replay.answers)
    return candidate_plan(rules, filters, kinds, replay.gates, replay.scan, replay.order, columns)


def _on_demand_kinds(hooks: FireHooks) -> frozenset[str]:
    """The kinds a replay reads only while the hooks are due (none if they cannot say)."""
    kinds = hooks.row_kinds
    if kinds is None or getattr(hooks, "due", None) is None:
        return frozenset()
    return kinds


def run_backtest(
    conn: sqlite3.Connection,
    rules: Sequence[CompiledRule],
    seq_range: SeqRange,
    *,
    hooks: FireHooks | None = None,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    batch: int = BATCH,
    host_factory: HostFactory | None = None,
    prefilter: bool = True,
    replay: Mode = "auto",
    wrap_host: Callable[[HostFactory], HostFactory] | None = None,
    pipeline: bool | None = None,
) -> BacktestResult:
    """Replay ``seq_range`` through a fresh evaluator; ``cancel`` is checked between batches.

    With ``prefilter`` (the default) only candidate rows are read: rows some
    rule's prefilter admits (and, where :func:`~engine.rules.evaluation.replay.plan_replay`
    chose to test them in SQL, whose gates pass), rows the window index keeps
    and rows of the kinds the fire hooks watch (ticks, for holds), merged in
    seq order; aggregates not worth feeding are answered by SQL on an index.
    Every other row would be fed to nothing and evaluated by no rule, so the
    fires are the same; ``prefilter=False`` reads every row into a window
    index fed with every shape (the reference for that claim). ``replay``
    picks how aggregates are answered (see :func:`plan_replay`); ``wrap_host``
    wraps the host factory (the lifecycle remembers the host that way).
    ``pipeline`` finds the candidate rows in a second thread
    (:mod:`~engine.rules.evaluation.pipeline`): None where it pays, True
    wherever it can, False never; the rows, and so the fires, are the same.
    """
    hooks = hooks or DefaultHooks()
    plan = ReplayPlan()
    if prefilter and host_factory is None and seq_range.rows:
        plan = plan_replay(
            conn,
            rules,
            (seq_range.first_seq, seq_range.first_at),
            seq_range.last_seq,
            seq_range.rows,
            seq_range.last_at - seq_range.first_at + 1,
            replay,
        )
    run = _Run(progress, cancel, batch, host_factory, prefilter, wrap_host, pipeline)
    try:
        return _replay(conn, rules, seq_range, hooks, plan, run)
    finally:
        plan.close(conn)


@dataclass(frozen=True, slots=True)
class _Run:
    """How one replay runs (the options of :func:`run_backtest` past the rules and range)."""

    progress: Callable[[Progress], None] | None
    cancel: threading.Event | None
    batch: int
    host_factory: HostFactory | None
    prefilter: bool
    wrap_host: Callable[[HostFactory], HostFactory] | None
    pipeline: bool | None


def _replay(
    conn: sqlite3.Connection,
    rules: Sequence[CompiledRule],
    seq_range: SeqRange,
    hooks: FireHooks,
    plan: ReplayPlan,
    run: _Run,
) -> BacktestResult:
    """The replay proper: the plan's tables are created here, after its producer started."""
    factory: HostFactory = run.host_factory or (lambda rs: plan.host(rs, conn))
    if run.wrap_host is not None:
        factory = run.wrap_host(factory)
    host = factory(rules)
    core = RowEvaluator(rules, host, hooks, conn=None)
    names = tuple((cr.rule.name, cr.rule.hash) for cr in rules)
    cplan = candidate_plan_for(rules, host, hooks, plan) if run.prefilter else CandidatePlan(None)
    fires: list[Fire] = []
    done, cancelled = 0, False
    stream = None
    if seq_range.rows and run.pipeline is not False:
        # Started before the tallies, so its pass over the range runs beside them.
        first_last = (seq_range.first_seq, seq_range.last_seq)
        stream = start_pipeline(conn, cplan, plan.tallies, plan.tables, first_last,
                                rows=seq_range.rows, force=bool(run.pipeline))  # fmt: skip
    try:
        plan.open(conn, None if stream is None else stream.tally_spans)
        if seq_range.rows:
            done, cancelled = _read(conn, core, host, hooks, seq_range, plan, cplan, stream,
                                    run, fires)  # fmt: skip
    finally:
        if stream is not None:
            stream.close()
    return BacktestResult(
        rules=names,
        range=seq_range,
        rows_scanned=done,
        rows_evaluated=core.rows_evaluated,
        fires=tuple(fires),
        rule_errors=tuple(core.rule_errors),
        store_errors=len(core.store_errors),
        cancelled=cancelled,
    )


def _read(
    conn: sqlite3.Connection,
    core: RowEvaluator,
    host: EvalHost,
    hooks: FireHooks,
    seq_range: SeqRange,
    plan: ReplayPlan,
    cplan: CandidatePlan,
    stream: PipelinedCandidates | None,
    run: _Run,
    fires: list[Fire],
) -> tuple[int, bool]:
    """Warm the window index, then process the range's rows in batches: (rows read, cancelled)."""
    max_window = host.max_window_ms if isinstance(host, WindowIndex) else 0
    if max_window and isinstance(host, WindowIndex):
        # Rows before the range are only fed, never evaluated: read just what feeds need.
        feeds = cplan if cplan.everything else candidate_plan_for((), host, _NO_HOOKS)
        warm = feeds.rows(
            conn,
            ROW_SELECT,
            "seq < ? AND at > ?",
            (seq_range.first_seq, seq_range.first_at - max_window),
        )
        for row in warm:
            host.feed(row)
    bound = ("seq BETWEEN ? AND ?", (seq_range.first_seq, seq_range.last_seq))
    total = seq_range.rows
    if run.progress is not None and not cplan.everything:
        total = cplan.count(conn, *bound)
    rows_iter = stream.rows() if stream is not None else cplan.rows(conn, ROW_SELECT, *bound)
    kinds = _on_demand_kinds(hooks) if not cplan.everything else frozenset()
    due = getattr(hooks, "due", None)
    on_demand = (
        HookRows(conn, kinds, seq_range.last_seq, due) if kinds and due is not None else None
    )
    loop = ReplayLoop(core.process, answer_primer(plan.answers, host), on_demand, due, fires)
    loop.last = seq_range.first_seq - 1  # hook rows are read from the range's start
    done, cancelled = 0, False
    try:
        while True:
            if run.cancel is not None and run.cancel.is_set():
                cancelled = True
                break
            rows = list(islice(rows_iter, run.batch))
            if not rows:
                loop.finish(seq_range.last_seq)
                break
            loop.run(rows)
            done += len(rows)
            if run.progress is not None:
                run.progress(Progress(done, total, len(fires), int(rows[-1][0])))
    finally:
        # An open read holds the shape tables: end it before they are dropped.
        rows_iter.close()
        if on_demand is not None:
            on_demand.close()
    return done + (on_demand.read if on_demand is not None else 0), cancelled


class _NoHooks(DefaultHooks):
    """Hooks that watch no kind: the warm-up reads rows for the window index only."""

    row_kinds: frozenset[str] | None = frozenset()


_NO_HOOKS = _NoHooks()
