"""The miner: finds the simulated fleet's planted patterns, and nothing on a quiet fleet."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from engine.cli.harness import main as harness_main
from engine.config import RulesConfig
from engine.fleet.sim import CHURN_PATH, RESTART_CAUSE, VERIFY_CAUSE_A, write_fleet
from engine.policy.miner import MINER_NAMES, mine
from engine.policy.proposals import list_proposals
from engine.rules.language.loader import default_sources, load_rules
from engine.store.db import connect

pytestmark = pytest.mark.slow


def _fleet(path: Path, quiet: bool) -> Path:
    conn = connect(path)
    write_fleet(conn, days=2, harnesses=12, seed=7, quiet=quiet)
    conn.close()
    return path


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fleet(tmp_path_factory.mktemp("planted") / "j.db", quiet=False)


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fleet(tmp_path_factory.mktemp("quiet") / "j.db", quiet=True)


def _copy(src: Path, dst: Path) -> sqlite3.Connection:
    conn = connect(src)
    conn.execute(f"VACUUM INTO '{dst}'")
    conn.close()
    return connect(dst)


def starter() -> list:  # type: ignore[type-arg]
    return list(load_rules(default_sources(), RulesConfig()).rules)


def test_finds_every_planted_pattern_when_no_rule_covers_it(planted: Path, tmp_path: Path) -> None:
    conn = _copy(planted, tmp_path / "a.db")
    found = {p.miner: p for p in mine(conn, [], RulesConfig())}
    assert set(found) == set(MINER_NAMES)
    causes = {i["cause_digest"] for i in found["same_cause"].instances}
    assert VERIFY_CAUSE_A in causes
    assert found["restart_streak"].instances == ({"harness": "h05", "cause_digest": RESTART_CAUSE},)
    assert {i["harness"] for i in found["repeated_tool_call"].instances} == {"h06"}
    assert found["churn_across_runs"].instances == ({"path": CHURN_PATH},)
    stored = {p.who: p for p in list_proposals(conn)}
    assert set(stored) == {f"miner:{m}" for m in MINER_NAMES}
    for proposal in stored.values():
        assert proposal.level == "notify"
        assert proposal.backtest is not None and proposal.backtest["fires"] > 0
        assert proposal.backtest["on_recorded_history"] is True


def test_patterns_the_starter_pack_covers_are_not_proposed(planted: Path, tmp_path: Path) -> None:
    conn = _copy(planted, tmp_path / "b.db")
    found = {p.miner: p for p in mine(conn, starter(), RulesConfig())}
    assert "same_cause" not in found
    assert "restart_streak" not in found
    assert "churn_across_runs" not in found


def test_quiet_fleet_proposes_nothing(quiet: Path, tmp_path: Path) -> None:
    conn = _copy(quiet, tmp_path / "c.db")
    assert mine(conn, [], RulesConfig()) == []
    assert mine(conn, starter(), RulesConfig()) == []
    assert list_proposals(conn) == []


def test_mining_is_deterministic_and_does_not_repeat_itself(planted: Path, tmp_path: Path) -> None:
    one = _copy(planted, tmp_path / "d1.db")
    two = _copy(planted, tmp_path / "d2.db")
    mine(one, [], RulesConfig())
    mine(two, [], RulesConfig())

    def facts(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
        return conn.execute(
            "SELECT name, hash, text, level, who, created_at, notes, backtest"
            " FROM rule_proposals ORDER BY id"
        ).fetchall()

    assert facts(one) == facts(two)
    again = mine(one, [], RulesConfig())
    assert all(p.already_proposed and p.proposal is None for p in again)
    assert len(facts(one)) == len(MINER_NAMES)


def test_cli_mine_dry_run_json(
    planted: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "e.db"
    _copy(planted, db).close()
    cfg = tmp_path / "harness.toml"
    disabled = ", ".join(f'"{r.rule.name}"' for r in starter())
    cfg.write_text(f"[memory.rules]\ndisable = [{disabled}]\n")
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    code = harness_main(
        ["rules", "mine", "--store", str(db), "--dry-run", "--json", "--miner", "restart_streak"]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["miner"] for p in out["patterns"]] == ["restart_streak"]
    assert out["patterns"][0]["proposal_id"] is None
    assert connect(db).execute("SELECT count(*) FROM rule_proposals").fetchone()[0] == 0
    assert harness_main(["rules", "mine", "--store", str(db), "--miner", "nope"]) == 2


def test_schedule_runs_in_journal_time_and_remembers(planted: Path, tmp_path: Path) -> None:
    from engine.errors import InputError
    from engine.policy.schedule import MinerSchedule, check_miner_names

    conn = _copy(planted, tmp_path / "s.db")
    assert not MinerSchedule(()).due(conn)  # default: no miners, nothing runs
    schedule = MinerSchedule(check_miner_names(["restart_streak"]))
    assert schedule.due(conn)
    found = schedule.run(conn, [], RulesConfig())
    assert [p.miner for p in found] == ["restart_streak"]
    assert not schedule.due(conn)  # the mark is stored in journal time
    assert not MinerSchedule(("restart_streak",)).due(conn)  # and survives a restart
    with pytest.raises(InputError, match="unknown miner"):
        check_miner_names(["restart_streak", "bogus"])


def test_evaluator_runs_configured_miners(
    planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ev.db"
    _copy(planted, db).close()
    cfg = tmp_path / "harness.toml"
    disabled = ", ".join(f'"{r.rule.name}"' for r in starter())
    cfg.write_text(
        f'[memory]\nrule_miners = ["restart_streak"]\n\n[memory.rules]\ndisable = [{disabled}]\n'
    )
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    assert harness_main(["evaluate", "--store", str(db)]) == 0
    whos = [p.who for p in list_proposals(connect(db))]
    assert whos == ["miner:restart_streak"]
    cfg.write_text('[memory]\nrule_miners = ["bogus"]\n')
    assert harness_main(["evaluate", "--store", str(db)]) == 2


def test_no_miners_configured_means_no_mining(
    planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ev2.db"
    _copy(planted, db).close()
    assert harness_main(["evaluate", "--store", str(db)]) == 0
    assert list_proposals(connect(db)) == []
