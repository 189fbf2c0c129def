"""F1 help: one short Markdown page per pane, shown in a modal."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP: dict[str, str] = {
    "fleet": """# Fleet
Every harness in the journal: state (running, idle, held, stopped), project,
age of its last event, fires in the last 24 hours and a sparkline of its
events per hour.

All rows share one activity scale (the column header says what █ is); zeros
are blank. A `running` harness silent longer than `[console] stale_after`
(default 2h) shows as stale.

- `r` refresh now (it also refreshes every 2 s while shown, when the store changed)
- `enter` show this harness's fires in the Fires pane (the filter is shown; `esc` clears it)
""",
    "fires": """# Fires
The live tail of rule fires, newest at the bottom.

- `/` filter: a bare word matches part of the rule, harness, target or status;
  `rule:NAME level:hold status:shadow harness:H` match exactly; `esc` clears
- scrolling up pauses the tail; a badge counts new fires; `end` or `G` jumps back
- `enter` explain the fire; `c` copy it as JSON (OSC 52)
""",
    "rules": """# Rules
Each rule: source (starter / policy / file), level and effective level, state
(active, shadow until when, disabled with its error, enforced), fires and
suppressed counts.

- `enter` view the source with its lint result (`esc` closes it)
- `b` backtest the rule
- `e` promotion view of a rule not enforced: what it would have held or stopped
  over recorded history and the `enforce` line to paste (nothing is written)
""",
    "holds": """# Holds
Active holds and recently released ones, with who released them.

- `enter` explain the fire that created the selected hold
- `x` release the selected hold (asks for a reason)
""",
    "decide": """# Decide
Pick a spec, type an input; the decision updates as you type: route and its
basis, route order, forbid, allow, elicit, after_success, and every rule with
the matched ones highlighted with the phrase that matched. The spec's scenario
tests run with pass/fail.

- `ctrl+o` browse for a spec file; `ctrl+l` type a path or glob
- `ctrl+s` save the current input and decision as a new scenario test (shows
  the full path and a diff; `y` writes, `n` cancels)
- `esc` leaves the input so the number keys switch panes; `i` types again
""",
    "explain": """# Explain
Step through one fire: the event row, now, each aggregate call (arguments,
result, the journal rows it counted), the level decision and its reasons, the
action outcome.

- `right`/`n` next step, `left`/`p` previous step
- `esc` goes back to the pane you came from
""",
    "backtest": """# Backtest
Pick a rule or edit a copy of it (lint errors show inline), choose a range and
run it over recorded history in a worker.

- `ctrl+r` run, `ctrl+x` cancel, `ctrl+e` reset the copy to the rule's source
- results: table of would-be fires, a per-day chart, totals by status, and the
  fires gained and lost against the rule's current version (marked in the
  table, lost ones listed last), and the parity stamp: live = backtest or the
  differences (a store_error row is the one allowed difference)
- `enter` on a result row explains that would-be fire
""",
    "proposals": """# Proposals
Rules proposed with `harness rules propose` or by the miner, each stored at
notify (a proposal never holds or stops) with its backtest on recorded history.

- `b` re-run the backtest over the last 7 days
- `p` prepare the policy-repo branch (asks which repo; nothing is pushed, the
  checkout and harness.toml are not touched)
""",
    "timeline": """# Timeline
Harnesses down, time across; each cell is the worst level that fired there
(annotate, notify, hold, stop; a dot when fires were only shadow or suppressed)
and holds are drawn as spans. Time is journal time: the right edge is the newest row.

- `+` / `-` zoom in / out (1h, 6h, 24h, 7d); `[` / `]` pan earlier / later; `n` now
- `enter` on a cell: the Fires pane filtered to that harness and time range
  (on the name column: the whole visible span)
""",
}


class HelpScreen(ModalScreen[None]):
    """Help for one pane; any of escape, q or F1 closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f1", "dismiss", "Close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 72; height: auto; max-height: 80%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, pane: str) -> None:
        super().__init__()
        self.pane = pane

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(HELP.get(self.pane, "# Help\nNo help for this pane."))


class KeysScreen(ModalScreen[None]):
    """``?``: every key of every pane (built from the bindings, so it cannot go stale)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
    ]
    DEFAULT_CSS = """
    KeysScreen { align: center middle; }
    KeysScreen > VerticalScroll {
        width: 80; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        lines = ["# Keys", "", "`?` or `esc` closes this; `F1` explains the pane you are on.", ""]
        for title, rows in self.sections:
            lines.append(f"## {title}")
            lines.append("")
            lines.append("| key | does |")
            lines.append("|---|---|")
            lines.extend(f"| `{key}` | {what} |" for key, what in rows)
            lines.append("")
        with VerticalScroll():
            yield Markdown("\n".join(lines))
