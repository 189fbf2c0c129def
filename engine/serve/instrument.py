"""Metrics recorded around serve's components, not inside them.

The hook handler and the OTLP receiver return what happened
(:class:`~engine.serve.handler.HookReply`,
:class:`~engine.serve.receiver.OtlpReply`); these wrappers, with the same
call shape, count it. So the use cases stay free of counters, and a test or
the command hook can run them without any metrics at all.
"""

from __future__ import annotations

from google.protobuf.message import Message

from engine.serve.handler import HookHandler, HookReply
from engine.serve.metrics import ServeMetrics
from engine.serve.receiver import OtlpReceiver, OtlpReply


class MeteredHooks:
    """A :class:`HookHandler` whose every reply is counted into :class:`ServeMetrics`."""

    def __init__(self, handler: HookHandler, metrics: ServeMetrics) -> None:
        self.handler = handler
        self.metrics = metrics

    def handle(
        self, agent: str, payload: object, *, harness: str | None, project: str | None
    ) -> HookReply:
        reply = self.handler.handle(agent, payload, harness=harness, project=project)
        m = self.metrics
        with m.lock:
            totals = m.totals
            if reply.status == 400:
                totals["bad_requests"] += 1
                return reply
            verdict = "duplicate" if reply.duplicates else "journaled" if reply.rows else "ignored"
            m.hook_events[(reply.label, verdict)] += 1
            totals["rows_stored"] += reply.rows
            totals["duplicates"] += reply.duplicates
            totals["rows_refused"] += reply.refused
            if reply.status == 503:
                totals["gate_errors" if reply.failed == "gate" else "store_unavailable"] += 1
                m.gate["error"] += 1
            elif reply.decision is not None:
                m.gate[reply.decision] += 1
                if reply.late:
                    totals["gate_late"] += 1
        return reply


class MeteredReceiver:
    """An :class:`OtlpReceiver` whose every reply is counted into :class:`ServeMetrics`."""

    def __init__(self, receiver: OtlpReceiver, metrics: ServeMetrics) -> None:
        self.receiver = receiver
        self.metrics = metrics

    def receive(self, request: Message) -> OtlpReply:
        reply = self.receiver.receive(request)
        m = self.metrics
        with m.lock:
            if reply.status == 503:
                m.totals["store_unavailable"] += 1
                return reply
            m.records.update(reply.records)
            m.totals["rows_stored"] += reply.rows
            m.totals["duplicates"] += reply.duplicates
            m.totals["records_rejected"] += reply.rejected
        return reply
