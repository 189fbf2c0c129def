"""Proposals pane: stored rule proposals with their backtests; view, re-run, prepare a branch.

Nothing here can grant enforcement: a proposal is at notify, and preparing
its branch only writes a branch in the policy checkout (never harness.toml).
"""

from __future__ import annotations

import sqlite3
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from console.context import ConsoleContext
from console.markup import escape
from console.panes.base import StorePane, plural
from console.widgets.confirm import AskText
from console.widgets.table import TEXT, Column, FitTable
from engine.timefmt import short_ms
from engine.views.proposals import Proposal, list_proposals, prepare_branch, rebacktest


def describe(p: Proposal) -> str:
    """The detail text for one proposal: notes, backtest table, rule text."""
    lines = [f"[b]#{p.id} {escape(p.name)}[/b]  hash {p.hash[:12]}…  level {p.level}"]
    if p.requested_level != p.level:
        lines.append(f"[yellow]asked for {p.requested_level}; capped at {p.level}[/]")
    lines.extend(escape(n) for n in p.notes)
    if p.branch:
        lines.append(f"branch: {escape(p.branch)}")
    bt = p.backtest
    if bt:
        lines.append("")
        lines.append(
            f"backtest, last {bt.get('days')} days on recorded history: "
            f"{bt.get('fires', 0)} fire(s) over {bt.get('rows', 0):,} rows"
        )
        for day, count in bt.get("per_day", []):
            bar = "█" * min(int(count), 40)
            lines.append(f"  {day}  {count:>5}  {bar}")
        if bt.get("silent"):
            lines.append("[i]never fired on recorded history: silence is not evidence[/i]")
    else:
        lines.append("no backtest yet (b to run one)")
    lines.append("")
    lines.append(escape(p.text))
    return "\n".join(lines)


class ProposalsPane(StorePane[list[Proposal]]):
    """Rules proposed with ``harness rules propose`` or by a miner, each with its backtest.

    A proposal is stored at notify (it never holds or stops, whatever it asked
    for); preparing its branch writes a branch in the policy checkout for
    review and touches neither that checkout's working tree nor harness.toml.

    Keys: ``b`` re-run the backtest over the last 7 days, ``p`` prepare the
    policy-repo branch (asks which repo; says so when none is configured),
    ``r`` refresh.

    Messages: :class:`Done` (a re-run or a branch finished); reads arrive as
    :class:`StorePane.Read`.
    """

    REFRESH_S = 5.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("b", "rebacktest", "Backtest", tooltip="again, over the last 7 days"),
        Binding("p", "prepare", "Branch", tooltip="prepare it in a [policy_repo.*] checkout"),
        Binding("r", "refresh", "Refresh", tooltip="read the store now"),
    ]
    DEFAULT_CSS = """
    ProposalsPane #proposals-body { height: 1fr; }
    ProposalsPane #proposals-table { width: 1fr; }
    ProposalsPane #proposals-detail { width: 45%; min-width: 30; border: round $primary;
        padding: 0 1; }
    """

    class Done(Message):
        """A worker finished an operator's action on a proposal: what to say."""

        def __init__(self, note: str) -> None:
            super().__init__()
            self.note = note

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.rows: list[Proposal] = []
        self._loaded = False

    def compose(self) -> ComposeResult:
        yield Static("", id="proposals-status", classes="status-line")
        with Horizontal(id="proposals-body"):
            yield FitTable(
                [
                    Column("id", "id", right=True),
                    Column("rule", "rule", TEXT, least=10),
                    Column("level", "level"),
                    Column("asked", "asked"),
                    Column("who", "who", TEXT, least=5),
                    Column("created", "created"),
                    Column("fires", "fires", right=True),
                    Column("branch", "branch", TEXT, least=6),
                ],
                id="proposals-table",
                cursor_type="row",
                zebra_stripes=True,
            )
            with VerticalScroll(id="proposals-detail"):
                yield Static("select a proposal to see its rule and backtest", id="proposal-text")

    def read(self, conn: sqlite3.Connection) -> list[Proposal]:
        return list_proposals(conn)

    def show(self, result: list[Proposal]) -> None:
        if self._loaded and result == self.rows:
            return
        self._loaded = True
        self.rows = result
        cells = []
        for p in result:
            fires = "" if p.backtest is None else f"{int(p.backtest.get('fires', 0)):,}"
            cells.append(
                (
                    f"{p.id:,}",
                    p.name,
                    p.level,
                    p.requested_level,
                    p.who,
                    short_ms(p.created_at, seconds=False),
                    fires,
                    p.branch or "",
                )
            )
        self.query_one(FitTable).show(cells, [str(p.id) for p in result])
        self._show(self.selected())
        self.query_one("#proposals-status", Static).update(
            f"{plural(len(result), 'proposal')} · all at notify or below: only your harness.toml"
            " enforces"
        )

    def selected(self) -> Proposal | None:
        table = self.query_one(FitTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(self.selected())

    def _show(self, proposal: Proposal | None) -> None:
        text = describe(proposal) if proposal else "no proposals yet: `harness rules propose FILE`"
        self.query_one("#proposal-text", Static).update(text)

    def action_rebacktest(self) -> None:
        proposal = self.selected()
        if proposal is None:
            self.app.notify("no proposal selected: `harness rules propose FILE` makes one")
            return
        self.app.notify(f"backtesting #{proposal.id} {proposal.name} over the last 7 days …")
        self._rebacktest(proposal.id)

    @work(thread=True, exclusive=True, group="proposal-backtest")
    def _rebacktest(self, proposal_id: int) -> None:
        config = self.context.current_config
        fresh = self.with_store(lambda conn: rebacktest(conn, proposal_id, config))
        if fresh is not None:
            fires = int(fresh.backtest.get("fires", 0)) if fresh.backtest else 0
            self.post_message(self.Done(f"#{proposal_id}: {plural(fires, 'fire')} in backtest"))

    def on_proposals_pane_done(self, message: Done) -> None:
        self.app.notify(message.note)
        self.action_refresh()

    async def action_prepare(self) -> None:
        proposal = self.selected()
        if proposal is None:
            self.app.notify("no proposal selected: `harness rules propose FILE` makes one")
            return
        if proposal.branch:
            self.app.notify(f"#{proposal.id} already has branch {proposal.branch}")
            return
        config = self.context.current_config
        if not config.policy_repos:
            # asking for a repo name here could only end in a failure: say what to configure
            where = config.source or "harness.toml"
            self.app.notify(
                f"no [policy_repo.*] is configured, so there is nowhere to prepare a branch: "
                f'add `[policy_repo.NAME]` with `path = "~/src/policy"` (a git checkout) '
                f"to {where}",
                title="No policy repo",
                severity="warning",
                timeout=10,
                markup=False,
            )
            return

        def done(answer: str | None) -> None:
            if answer is not None:
                self._prepare(proposal.id, answer.strip() or None)

        repos = ", ".join(r.name for r in self.context.current_config.policy_repos) or "none"
        await self.app.push_screen(
            AskText(
                f"Prepare a policy-repo branch for #{proposal.id} {proposal.name}?",
                detail=f"configured policy repos: {repos}; the checkout and harness.toml "
                "are not touched, nothing is pushed",
                placeholder="policy repo name (empty: the first)",
                ok_label="Prepare",
                required=False,
            ),
            done,
        )

    @work(thread=True, group="proposal-branch")
    def _prepare(self, proposal_id: int, repo: str | None) -> None:
        config = self.context.current_config
        branch = self.with_store(lambda conn: prepare_branch(conn, proposal_id, config, repo))
        if branch is not None:
            self.post_message(self.Done(f"branch {branch.branch} prepared in {branch.path}"))
