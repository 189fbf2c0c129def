"""Proposals pane: stored rule proposals with their backtests; view, re-run, prepare a branch.

Nothing here can grant enforcement: a proposal is at notify, and preparing
its branch only writes a branch in the policy checkout (never harness.toml).
"""

from __future__ import annotations

from typing import ClassVar

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from console.context import ConsoleContext
from console.panes.base import StorePane
from console.widgets.confirm import AskText
from engine.policy.proposals import Proposal, list_proposals
from engine.timefmt import short_ms


def describe(p: Proposal) -> str:
    """The detail text for one proposal: notes, backtest table, rule text."""
    lines = [f"[b]#{p.id} {escape(p.name)}[/b]  hash {p.hash[:12]}  level {p.level}"]
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


class ProposalsPane(StorePane):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("b", "rebacktest", "Re-run backtest"),
        Binding("p", "prepare", "Prepare branch"),
        Binding("r", "refresh", "Refresh"),
    ]
    DEFAULT_CSS = """
    ProposalsPane #proposals-body { height: 1fr; }
    ProposalsPane #proposals-table { width: 1fr; }
    ProposalsPane #proposals-detail { width: 60; border: round $primary; padding: 0 1; }
    """

    class Updated(Message):
        def __init__(self, rows: list[Proposal]) -> None:
            super().__init__()
            self.rows = rows

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.rows: list[Proposal] = []
        self._loaded = False

    def compose(self) -> ComposeResult:
        yield Static("", id="proposals-status", classes="status-line")
        with Horizontal(id="proposals-body"):
            table: DataTable[str] = DataTable(
                id="proposals-table", cursor_type="row", zebra_stripes=True
            )
            table.add_columns("id", "rule", "level", "asked", "who", "created", "fires", "branch")
            yield table
            with VerticalScroll(id="proposals-detail"):
                yield Static("select a proposal to see its rule and backtest", id="proposal-text")

    def on_mount(self) -> None:
        self.action_refresh()
        if self.context.live:
            self.poll_every(max(self.context.refresh_interval, 5.0))

    def poll(self) -> None:
        self._load()

    def action_refresh(self) -> None:
        self._load(force=True)

    @work(thread=True, exclusive=True, group="proposals")
    def _load(self, force: bool = False) -> None:
        rows = self.with_store_if_changed(list_proposals, force=force)
        if rows is not None:
            self.post_message(self.Updated(rows))

    def on_proposals_pane_updated(self, message: Updated) -> None:
        if self._loaded and message.rows == self.rows:
            return
        self._loaded = True
        self.rows = message.rows
        table = self.query_one("#proposals-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for p in message.rows:
            fires = "" if p.backtest is None else str(p.backtest.get("fires", 0))
            table.add_row(
                str(p.id),
                p.name,
                p.level,
                p.requested_level,
                p.who,
                short_ms(p.created_at, seconds=False),
                fires,
                p.branch or "",
                key=str(p.id),
            )
        if message.rows:
            table.move_cursor(row=min(max(cursor, 0), len(message.rows) - 1))
        self._show(self.selected())
        self.query_one("#proposals-status", Static).update(
            f"{len(message.rows)} proposal(s); all at notify or below: enforcing needs the "
            "operator's harness.toml"
        )

    def selected(self) -> Proposal | None:
        table = self.query_one("#proposals-table", DataTable)
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
        if proposal is not None:
            self.query_one("#proposals-status", Static).update(
                f"backtesting #{proposal.id} {proposal.name} …"
            )
            self._rebacktest(proposal.id)

    @work(thread=True, exclusive=True, group="proposal-backtest")
    def _rebacktest(self, proposal_id: int) -> None:
        from engine.policy.workflow import rerun_backtest

        config = self.context.current_config
        fresh = self.with_store(lambda conn: rerun_backtest(conn, proposal_id, config))
        if fresh is None:
            return
        fires = fresh.backtest.get("fires", 0) if fresh.backtest else 0
        self.app.call_from_thread(self.app.notify, f"#{proposal_id}: {fires} fire(s) in backtest")
        self.app.call_from_thread(self.action_refresh)

    def action_prepare(self) -> None:
        proposal = self.selected()
        if proposal is None:
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
        self.app.push_screen(
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
        from engine.policy.workflow import prepare_proposal_branch

        config = self.context.current_config
        branch = self.with_store(
            lambda conn: prepare_proposal_branch(conn, proposal_id, config, repo_name=repo)
        )
        if branch is None:
            return
        self.app.call_from_thread(
            self.app.notify, f"branch {branch.branch} prepared in {branch.path}"
        )
        self.app.call_from_thread(self.action_refresh)
