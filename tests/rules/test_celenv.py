"""The CEL environment: typed events per kind, ``now``, primitives, budgets, errors."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from engine.config import RulesConfig
from engine.rules.language.celenv import COST_EXCEEDED, CelEnvironment, default_environment
from engine.rules.language.loader import compile_rule_text
from engine.rules.language.model import SATURATION, CompiledRule

DIGEST = "sha256:" + "a" * 64


class FixedHost:
    """Answers every primitive with fixed values and records the arguments."""

    def __init__(self, count: int = 0, distinct: int = 0, exists: bool = False) -> None:
        self.c, self.d, self.e = count, distinct, exists
        self.seen: list[tuple[str, str | None, dict[str, str], int]] = []

    def count(self, selector: Mapping[str, str], window_ms: int) -> int:
        self.seen.append(("count", None, dict(selector), window_ms))
        return self.c

    def distinct(self, field: str, selector: Mapping[str, str], window_ms: int) -> int:
        self.seen.append(("distinct", field, dict(selector), window_ms))
        return self.d

    def exists(self, selector: Mapping[str, str], window_ms: int) -> bool:
        self.seen.append(("exists", None, dict(selector), window_ms))
        return self.e


def rule(when: str, on: str = "run_event", cost_limit: int = 10_000) -> CompiledRule:
    text = f"name: r\non: {on}\nlevel: notify\ntarget: type\nwhen: {when!r}\n"
    cr, errors = compile_rule_text(text, "r.yml", "file", RulesConfig(cost_limit=cost_limit))
    assert cr is not None, [str(e) for e in errors]
    return cr


def errors_of(when: str, on: str = "run_event") -> list[str]:
    text = f"name: r\non: {on}\nlevel: notify\ntarget: type\nwhen: {when!r}\n"
    cr, errors = compile_rule_text(text, "r.yml", "file", RulesConfig())
    assert cr is None
    return [e.message for e in errors]


def row(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "seq": 1,
        "kind": "run_event",
        "type": "tool_call",
        "source": "observer",
    }
    base.update(kw)
    return base


def test_undefined_field_is_a_compile_error_naming_the_field() -> None:
    msgs = errors_of('event.colour == "red"')
    assert any("colour" in m and "undefined field" in m for m in msgs)


def test_field_of_another_kind_is_undefined() -> None:
    # other_harness exists on graph_event only; fact exists on fact_event only
    assert any("other_harness" in m for m in errors_of('event.other_harness == "h"'))
    assert any("harness" in m for m in errors_of('event.harness == "h"', on="tick"))
    rule('event.other_harness == "h"', on="graph_event")
    rule('event.fact == "f"', on="fact_event")


def test_type_error_is_a_compile_error() -> None:
    msgs = errors_of('event.n == "three"')
    assert any("no matching overload" in m for m in msgs)


def test_non_bool_result_is_rejected() -> None:
    msgs = errors_of("event.n + 1")
    assert any("must be a bool" in m and "int" in m.lower() for m in msgs)


def test_unknown_function_is_rejected() -> None:
    assert any("sleep" in m for m in errors_of("sleep(1) == 1"))


def test_absent_fields_read_empty_and_has_is_false() -> None:
    cr = rule('!has(event.harness) && event.harness == "" && event.n == 0 && !has(event.n)')
    assert cr.evaluate(row(), 0, FixedHost()).matched
    present = cr.evaluate(row(harness="h1", n=3), 0, FixedHost())
    assert not present.matched and present.error is None


def test_has_is_true_for_a_present_empty_value_only_when_stored() -> None:
    cr = rule('has(event.path) && event.path == "/x"')
    assert cr.evaluate(row(path="/x"), 0, FixedHost()).matched
    assert not cr.evaluate(row(path=None), 0, FixedHost()).matched


def test_now_is_the_rows_timestamp() -> None:
    cr = rule('now == timestamp("2026-01-02T03:04:05.678Z")')
    at = int(datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC).timestamp() * 1000)
    assert cr.evaluate(row(), at, FixedHost()).matched
    assert not cr.evaluate(row(), at + 1, FixedHost()).matched


def test_primitives_receive_selector_window_and_are_recorded() -> None:
    cr = rule(
        'count({"harness": event.harness, "type": "restart"}, duration("1h")) >= 3'
        ' && distinct("run", {"cause_digest": event.cause_digest}, duration("90m")) >= 2'
        ' && exists({"tool": "bash"}, duration("30s"))'
    )
    host = FixedHost(count=3, distinct=2, exists=True)
    res = cr.evaluate(row(harness="h1", cause_digest=DIGEST), 5_000, host)
    assert res.matched and res.error is None
    assert host.seen == [
        ("count", None, {"harness": "h1", "type": "restart"}, 3_600_000),
        ("distinct", "run", {"cause_digest": DIGEST}, 5_400_000),
        ("exists", None, {"tool": "bash"}, 30_000),
    ]
    assert [c.fn for c in res.calls] == ["count", "distinct", "exists"]
    assert res.calls[0].selector == (("harness", "h1"), ("type", "restart"))
    assert res.calls[1].field == "run" and res.calls[1].result == 2
    assert res.cost == cr.rule.static_cost


def test_short_circuit_skips_primitives() -> None:
    cr = rule('event.n > 5 && count({"harness": event.harness}, duration("1h")) > 0')
    host = FixedHost(count=1)
    res = cr.evaluate(row(n=1), 0, host)
    assert not res.matched and host.seen == [] and res.calls == ()
    assert cr.evaluate(row(n=9), 0, host).matched and len(host.seen) == 1


def test_results_saturate() -> None:
    cr = rule('count({"type": "x"}, duration("1h")) == 1000000')
    res = cr.evaluate(row(), 0, FixedHost(count=SATURATION * 5))
    assert res.matched and res.calls[0].result == SATURATION


def test_runtime_budget_aborts_with_cost_limit_exceeded() -> None:
    env = CelEnvironment()
    when = 'count({"type": "a"}, duration("1h")) >= 0 && count({"type": "b"}, duration("1h")) >= 0'
    expr, errs = env.compile("run_event", when)
    assert expr is not None and not errs
    run = env.make_runner("run_event", expr, base_cost=50, cost_limit=200)
    res = run(row(), 0, FixedHost(count=1))
    assert res.error == COST_EXCEEDED and not res.matched
    assert len(res.calls) == 1  # the second call was refused before the host ran
    ok = env.make_runner("run_event", expr, base_cost=50, cost_limit=250)(row(), 0, FixedHost(1))
    assert ok.matched and ok.cost == 250


def test_runtime_error_is_reported_not_raised() -> None:
    cr = rule("100 / event.n > 1")
    res = cr.evaluate(row(n=0), 0, FixedHost())
    assert not res.matched and res.error and "divide by zero" in res.error
    assert cr.evaluate(row(n=10), 0, FixedHost()).matched


def test_host_exception_becomes_an_error_result() -> None:
    class Broken(FixedHost):
        def count(self, selector: Mapping[str, str], window_ms: int) -> int:
            raise RuntimeError("disk on fire")

    cr = rule('count({"type": "a"}, duration("1h")) > 0')
    res = cr.evaluate(row(), 0, Broken())
    assert not res.matched and res.error and "disk on fire" in res.error


def test_bad_row_value_type_is_an_error_result() -> None:
    cr = rule("event.n > 1")
    res = cr.evaluate(row(n="many"), 0, FixedHost())
    assert not res.matched and res.error and res.error.startswith("bad event row")


def test_row_cache_never_reuses_a_stale_event() -> None:
    cr = rule('event.type == "restart" && event.harness == "h1"')
    r = row(type="restart", harness="h1")
    assert cr.evaluate(r, 0, FixedHost()).matched
    r["harness"] = "h2"  # same dict, same seq, different content
    assert not cr.evaluate(r, 0, FixedHost()).matched


def test_one_program_many_threads_each_with_its_own_host() -> None:
    cr = rule('count({"harness": event.harness}, duration("1h")) == event.n')
    failures: list[str] = []

    def worker(k: int) -> None:
        host = FixedHost(count=k)
        for i in range(300):
            res = cr.evaluate(row(seq=i, harness=f"h{k}", n=k), i, host)
            if not res.matched or res.calls[0].selector != (("harness", f"h{k}"),):
                failures.append(f"thread {k} iteration {i}: {res}")
                return

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_type_guard_rejects_other_types_without_touching_the_host() -> None:
    cr = rule(
        'event.type in ["restart", "verify_failed"] && count({"type": "x"}, duration("1h")) > 0'
    )
    host = FixedHost(count=1)
    assert not cr.evaluate(row(type="tool_call"), 0, host).matched and host.seen == []
    assert cr.evaluate(row(type="verify_failed"), 0, host).matched


def test_environment_is_shared() -> None:
    assert default_environment() is default_environment()


@pytest.mark.parametrize("kind", ["run_event", "graph_event", "fact_event", "tick"])
def test_common_fields_exist_on_every_kind(kind: str) -> None:
    cr = rule('event.seq >= 0 && event.kind == "' + kind + '" && event.source != "x"', on=kind)
    assert cr.evaluate(row(kind=kind), 0, FixedHost()).matched


def test_every_compile_error_is_reported_with_a_friendly_field_message() -> None:
    msgs = errors_of('event.foo == 1 && event.bar == "x"')
    assert len(msgs) == 2
    assert msgs[0].startswith("undefined field 'foo': not a field of run_event events")
    assert "harness" in msgs[0] and "RunEvent" not in msgs[0]
