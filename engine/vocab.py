"""The rule vocabulary in one place: levels, the enforced ones, actions, fire statuses.

Why one module: the loader checks a rule's ``level``, the lifecycle caps it,
the evaluator records the status, the config names the actions after the
levels that trigger them, the fleet summary ranks fires by level in SQL, and a
policy-repo proposal rewrites an acting level to the cap. When each restated
the words, they could drift; now every one of them imports them from here
(tests/test_vocabulary.py fails when a level word is spelled out elsewhere).

It is a foundation: it imports nothing at all (not even ``dataclasses``), so
every floor may use it, the config included, and the ``harness hook`` cold
start pays nothing for it. What a match becomes (:class:`FireDecision`) is the
rules' own type and lives with the hooks that return it
(:mod:`engine.rules.evaluation.hooks`).
"""

from __future__ import annotations

#: The levels, in increasing authority.
ANNOTATE = "annotate"
NOTIFY = "notify"
HOLD = "hold"
STOP = "stop"
#: Levels in increasing authority; hold and stop act only when enforced.
LEVELS: tuple[str, ...] = (ANNOTATE, NOTIFY, HOLD, STOP)
#: The levels that act on a harness, and so need the operator's enforce list.
ENFORCED_LEVELS: frozenset[str] = frozenset({HOLD, STOP})
#: The level an enforced level is capped at when it is not enforced.
CAP_LEVEL = NOTIFY

#: The configured actions (``[memory.rules.actions]``), named after the levels that run them:
#: ``notify`` for notify and hold fires, ``stop`` for stop fires.
ACTION_NAMES: tuple[str, ...] = (NOTIFY, STOP)
#: Which action a fire at each effective level runs (annotate runs none).
ACTION_FOR_LEVEL: dict[str, str] = {NOTIFY: NOTIFY, HOLD: NOTIFY, STOP: STOP}

#: Statuses of a fire row.
FIRED = "fired"
SHADOW = "shadow"
SUPPRESSED = "suppressed"
DISABLED = "disabled"
STATUSES: tuple[str, ...] = (FIRED, SHADOW, SUPPRESSED)
