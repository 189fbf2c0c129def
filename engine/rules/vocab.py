"""The rule vocabulary in one place: levels, the enforced ones, fire statuses, the decision.

Why one module: the loader checks a rule's ``level``, the lifecycle caps it,
the evaluator records the status, and a policy-repo proposal rewrites an
acting level to the cap. When each restated the words, they could drift; now
every one of them imports them from here. The module imports nothing else of
the engine, so any floor may use it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Levels in increasing authority; hold and stop act only when enforced.
LEVELS: tuple[str, ...] = ("annotate", "notify", "hold", "stop")
#: The levels that act on a harness, and so need the operator's enforce list.
ENFORCED_LEVELS: frozenset[str] = frozenset({"hold", "stop"})
#: The level an enforced level is capped at when it is not enforced.
CAP_LEVEL = "notify"

#: Statuses of a fire row.
FIRED = "fired"
SHADOW = "shadow"
SUPPRESSED = "suppressed"
DISABLED = "disabled"
STATUSES: tuple[str, ...] = (FIRED, SHADOW, SUPPRESSED)


@dataclass(frozen=True, slots=True)
class FireDecision:
    """What a match becomes: its status, the level it acts at, and every reason for both."""

    status: str
    effective_level: str
    reasons: tuple[str, ...] = ()

    @property
    def acts(self) -> bool:
        """Whether the fire acts (shadow, suppressed and disabled fires only record)."""
        return self.status == FIRED
