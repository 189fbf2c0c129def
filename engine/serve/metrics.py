"""Serve's own Prometheus families, appended to the store's (``harness metrics``) on ``/metrics``.

Every label value comes from a fixed list (endpoint, status code, a known
event name or ``other``, verdict, decision): never request content. The
counters live in the serving process and are recorded *around* the
components (:mod:`engine.serve.instrument`), from worker threads, so each
update takes the lock; the ones an operator must see after the fact (gate
failures, requests refused, late answers) are also flushed to the store's
``journal_counters`` as ``serve_*`` so ``harness doctor`` shows them.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from dataclasses import dataclass, field

#: Histogram bucket upper bounds, seconds.
BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)
#: Counters persisted for doctor (name in the store: ``serve_<name>``).
PERSISTED = (
    "gate_errors",
    "unauthorized",
    "bad_requests",
    "too_large",
    "rows_refused",
    "rows_dropped",
    "records_rejected",
    "store_unavailable",
    "gate_late",
    "malformed_requests",
)


@dataclass(slots=True)
class Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0
    n: int = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds
        self.n += 1


@dataclass(slots=True)
class ServeMetrics:
    """In-process counters of one serve."""

    requests: Counter[tuple[str, int]] = field(default_factory=Counter)
    records: Counter[tuple[str, str]] = field(default_factory=Counter)
    hook_events: Counter[tuple[str, str]] = field(default_factory=Counter)
    gate: Counter[str] = field(default_factory=Counter)
    totals: Counter[str] = field(default_factory=Counter)
    latency: dict[str, Histogram] = field(default_factory=dict)
    flushed: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        with self.lock:
            self.requests[(endpoint, status)] += 1
            self.latency.setdefault(endpoint, Histogram()).observe(seconds)

    def add(self, name: str, n: int = 1) -> None:
        if n:
            with self.lock:
                self.totals[name] += n

    def unflushed(self) -> dict[str, int]:
        """Deltas of the persisted counters since the last call (and mark them flushed)."""
        out: dict[str, int] = {}
        with self.lock:
            for name in PERSISTED:
                now = self.totals[name]
                delta = now - self.flushed.get(name, 0)
                if delta:
                    out[f"serve_{name}"] = delta
                    self.flushed[name] = now
        return out

    def render(self) -> str:
        with self.lock:
            return self._render()

    def _render(self) -> str:
        lines: list[str] = []

        def family(name: str, kind: str, help_: str) -> None:
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {kind}")

        family("harness_serve_requests_total", "counter", "HTTP requests, by endpoint and status.")
        for (endpoint, status), n in sorted(self.requests.items()):
            lines.append(
                f'harness_serve_requests_total{{endpoint="{endpoint}",status="{status}"}} {n}'
            )
        family(
            "harness_serve_records_total",
            "counter",
            "OTLP log records, by event name and verdict (admitted, duplicate, blocked, ignored, "
            "rejected).",
        )
        for (name, verdict), n in sorted(self.records.items()):
            lines.append(f'harness_serve_records_total{{event="{name}",verdict="{verdict}"}} {n}')
        family(
            "harness_serve_hook_events_total",
            "counter",
            "Hook events, by agent event name and verdict (journaled, duplicate, ignored).",
        )
        for (name, verdict), n in sorted(self.hook_events.items()):
            lines.append(
                f'harness_serve_hook_events_total{{event="{name}",verdict="{verdict}"}} {n}'
            )
        family("harness_serve_gate_answers_total", "counter", "Gate answers, by decision.")
        for decision, n in sorted(self.gate.items()):
            lines.append(f'harness_serve_gate_answers_total{{decision="{decision}"}} {n}')
        family(
            "harness_serve_events_total",
            "counter",
            "Serve's own events: rows stored, duplicates, refused values, store unavailable, "
            "gate errors and late answers, unauthorized, bad, malformed and oversize requests.",
        )
        for name, n in sorted(self.totals.items()):
            lines.append(f'harness_serve_events_total{{event="{name}"}} {n}')
        family("harness_serve_handler_seconds", "histogram", "Request handling time, by endpoint.")
        for endpoint, h in sorted(self.latency.items()):
            cumulative = 0
            for bound, count in zip((*BUCKETS, float("inf")), h.counts, strict=True):
                cumulative += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                lines.append(
                    f'harness_serve_handler_seconds_bucket{{endpoint="{endpoint}",le="{le}"}} '
                    f"{cumulative}"
                )
            lines.append(f'harness_serve_handler_seconds_sum{{endpoint="{endpoint}"}} {h.total!r}')
            lines.append(f'harness_serve_handler_seconds_count{{endpoint="{endpoint}"}} {h.n}')
        return "\n".join(lines) + "\n"
