"""The SkillSpec v0 grammar as data, and a strict checker that walks a parsed spec with it.

Why a table instead of classes: the reference deserialises into structs that
deny unknown fields, so every typo is an error. Expressing the grammar as data
lets one small walker report *all* such errors at once (the reference stops at
the first), each at the key's own file:line:col, with the dotted path.

Scalar coercion follows the reference's YAML reader (serde_yaml 0.9):

* a ``String`` field accepts any scalar and keeps its source text (``id: 42``
  is the string ``"42"``), except inside the two "untagged" unions (code
  source, recipe step), where the value must already be a string;
* a ``bool`` field accepts only ``true``/``false``; ``yes``/``no`` are strings
  under YAML 1.2 and therefore a type error;
* an empty value (``routes:`` with nothing after it) is an empty list/map/
  object, while ``~``/``null`` there is a type error; an ``Option`` is ``None``
  for any null.

The walker rewrites coerced string scalars in place, so downstream code (decide,
tests) can rely on string fields being ``str``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from engine.errors import Diagnostic, Location
from engine.yamlsrc import LocDict, LocList

# --------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Str:
    """A string; non-string scalars are read as their source text."""


@dataclass(frozen=True)
class Bool:
    """``true`` or ``false`` only."""


@dataclass(frozen=True)
class Int:
    """An integer (``unsigned`` for the reference's u32 fields)."""

    unsigned: bool = False


@dataclass(frozen=True)
class AnyValue:
    """Free-form YAML: metadata, allow values, choice sets, schemas, closures."""


@dataclass(frozen=True)
class Enum:
    """One of a fixed set of snake_case names."""

    values: tuple[str, ...]


@dataclass(frozen=True)
class Seq:
    item: Type


@dataclass(frozen=True)
class Map:
    """A mapping from free keys (ids) to values of one type."""

    value: Type


@dataclass(frozen=True)
class Opt:
    """``Option<T>``: any null is ``None``."""

    inner: Type


@dataclass(frozen=True)
class Obj:
    """A struct with a closed set of keys; ``required`` keys must be present."""

    name: str
    fields: dict[str, Type]
    required: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Untagged:
    """A union picked by which discriminating key is present (code source, recipe step)."""

    name: str
    variants: dict[str, Obj]  # discriminating key -> variant


Type = Str | Bool | Int | AnyValue | Enum | Seq | Map | Opt | Obj | Untagged

S, B, ANY = Str(), Bool(), AnyValue()
OS, OB, OI, OU = Opt(S), Opt(B), Opt(Int()), Opt(Int(unsigned=True))
LS = Seq(S)


def obj(name: str, required: str = "", /, **fields: Type) -> Obj:
    """Build an :class:`Obj`; ``if_``-style names map to the YAML key without the underscore."""
    clean = {k.rstrip("_"): v for k, v in fields.items()}
    return Obj(name, clean, frozenset(required.split()))


SAFETY = Enum(
    (
        "read_only",
        "local_read",
        "local_write",
        "network_read",
        "network_write",
        "browser_attach",
        "credential_request",
        "destructive",
    )
)
USE_KINDS = Enum(
    (
        "route",
        "rule",
        "state",
        "elicitation",
        "dependency",
        "command",
        "code",
        "artifact",
        "recipe",
        "snippet",
    )
)
TRACE_EVENT_KINDS = (
    "input_received",
    "spec_loaded",
    "rule_evaluated",
    "rule_matched",
    "route_selected",
    "route_order_set",
    "forbid_added",
    "allow_added",
    "elicitation_requested",
    "after_success_scheduled",
    "outcome_recorded",
)
DEPENDENCY_KINDS = ("cli", "package", "file", "env", "service", "adapter", "browser")

TOOL_BOUNDARY = obj(
    "ToolBoundary",
    default=Opt(Enum(("allow", "deny"))),
    allow=LS,
    forbid=LS,
    permission_required_for=LS,
)
HANDOFF = obj(
    "RouteHandoff",
    "to_skill boundary",
    to_skill=S,
    boundary=Enum(("stop_current_skill", "resume_after_handoff")),
    pass_context=LS,
    forbid=LS,
    reason=OS,
)
JUMP = obj("ExecutionJump", "when to_phase", when=S, to_phase=S, reason=OS)
PHASE = obj(
    "ExecutionPhase",
    "id owner_skill",
    id=S,
    owner_skill=S,
    route=OS,
    description=OS,
    requires=LS,
    checks=LS,
    forbid=LS,
    handoff=Opt(HANDOFF),
    jumps=Seq(JUMP),
    tool_boundary=Opt(TOOL_BOUNDARY),
)
PLAN = obj("ExecutionPlan", "phases", mode=Enum(("ordered",)), phases=Seq(PHASE), reason=OS)
ROUTE = obj(
    "Route",
    "id label",
    id=S,
    label=S,
    rank=OI,
    description=OS,
    checks=LS,
    handoff=Opt(HANDOFF),
    execution_plan=Opt(PLAN),
    tool_boundary=Opt(TOOL_BOUNDARY),
)
PREDICATE = obj(
    "Predicate",
    user_says_any=LS,
    user_says_all_groups=Seq(LS),
    task_recurrence_likely=OB,
    domain_object_task=OB,
    interactive_prompt_likely=OB,
    command_likely_long_running=OB,
)
RULE = obj(
    "Rule",
    "id",
    id=S,
    when=PREDICATE,
    prefer=OS,
    route_order=LS,
    forbid=LS,
    allow=Map(ANY),
    elicit=LS,
    after_success=LS,
    reason=OS,
)
STATE = obj("State", do=LS, say=OS, ask=OS, next=OS, yes=OS, no=OS)
CHOICE = obj(
    "ElicitationChoice",
    "id label",
    id=S,
    label=S,
    description=OS,
    sets=Map(ANY),
    route=OS,
    next=OS,
    safety=Opt(SAFETY),
)
CONDITION = obj("ElicitationCondition", route=OS, missing=OS, predicate=Opt(PREDICATE))
ELICITATION = obj(
    "Elicitation",
    "question choices",
    question=S,
    required_when=Seq(CONDITION),
    choices=Seq(CHOICE),
    default=OS,
    max_choices=OU,
)
TRACE = obj(
    "TraceConfig",
    "mode",
    mode=Enum(("event_log",)),
    required=B,
    record=Seq(Enum(TRACE_EVENT_KINDS)),
)
COMMAND = obj(
    "CommandTemplate",
    "template",
    description=OS,
    template=S,
    safety=Opt(SAFETY),
    requires=obj("CommandRequires", dependencies=LS, resources=LS, files=LS, env=LS, auth=LS),
    parse=Map(S),
    success_when=Map(ANY),
)
DEPENDENCY = obj(
    "Dependency",
    "kind",
    kind=Enum(DEPENDENCY_KINDS),
    description=OS,
    command=OS,
    path=OS,
    env=OS,
    check=Opt(obj("DependencyCheck", command=OS, path=OS, env=OS)),
    permission=Opt(obj("DependencyPermission", required=B, reason=OS, safety=Opt(SAFETY))),
    provision=Opt(
        obj(
            "DependencyProvision",
            elicit=OS,
            options=Seq(
                obj(
                    "DependencyProvisionOption",
                    "id label",
                    id=S,
                    label=S,
                    description=OS,
                    command=OS,
                    safety=Opt(SAFETY),
                )
            ),
        )
    ),
)
USE = obj("Use", "kind id", kind=USE_KINDS, id=S)
IMPORT = obj(
    "Import",
    "path role",
    path=S,
    role=Enum(("policy", "reference", "procedure", "example", "skill")),
    description=OS,
    section=OS,
    load=Enum(("always", "on_demand")),
    requires=obj("ImportRequires", imports=LS),
    used_by=Seq(USE),
    load_when=LS,
)
RESOURCE = obj(
    "Resource",
    "path role",
    path=S,
    role=Enum(("source_material", "reference", "required_procedure", "example", "script", "asset")),
    description=OS,
    used_by=Seq(USE),
    load_when=LS,
)
CODE_SOURCE = Untagged(
    "CodeSource",
    {
        "inline": obj("CodeInlineSource", "inline", inline=S),
        "file": obj(
            "CodeFileSource",
            "file",
            file=S,
            from_resource=OS,
            fence_index=OU,
            heading=OS,
            sha256=OS,
        ),
    },
)
CODE = obj(
    "CodeBlock",
    "language kind source",
    language=S,
    kind=Enum(
        (
            "example",
            "runnable_script",
            "probe",
            "transform",
            "validator",
            "troubleshooting",
            "reference",
        )
    ),
    source=CODE_SOURCE,
    provenance=Opt(
        obj(
            "CodeProvenance",
            resource=OS,
            import_=OS,
            fence_index=OU,
            heading=OS,
            line_start=OU,
            line_end=OU,
        )
    ),
    purpose=OS,
    requires=obj("CodeRequires", dependencies=LS, imports=LS, resources=LS, artifacts=LS),
    inputs=LS,
    outputs=LS,
    safety=obj("CodeSafety", mutates_input=B, writes_files=B, network=B, notes=LS),
    use_when=LS,
)
EXEC_REF = obj("ExecutableRef", "kind id", kind=Enum(("command", "code", "recipe")), id=S)
ARTIFACT = obj(
    "Artifact",
    "kind",
    kind=Enum(("file", "directory", "json", "text", "image", "pdf", "transcript", "report")),
    description=OS,
    path=OS,
    schema=Opt(ANY),
    produced_by=Seq(EXEC_REF),
    consumed_by=Seq(EXEC_REF),
)
STEP_KEYS = (
    "load_import",
    "load_resource",
    "run_command",
    "run_code",
    "produce_artifact",
    "consume_artifact",
    "ask",
    "branch",
    "note",
)
BRANCH = obj("RecipeBranch", "if then", if_=S, then=S, otherwise=OS)
RECIPE_STEP = Untagged(
    "RecipeStep",
    {
        key: (
            obj("RecipeStepBranch", "branch", branch=BRANCH)
            if key == "branch"
            else Obj(f"RecipeStep.{key}", {key: S}, frozenset({key}))
        )
        for key in STEP_KEYS
    },
)
RECIPE = obj(
    "Recipe",
    description=OS,
    ordered=B,
    requires=obj("RecipeRequires", imports=LS, resources=LS, dependencies=LS, artifacts=LS),
    steps=Seq(RECIPE_STEP),
)
EXPECTATION = obj(
    "Expectation",
    route=OS,
    route_order=LS,
    plan_phases=LS,
    plan_jumps=LS,
    forbid=LS,
    forbid_exact=Opt(LS),
    not_forbid=LS,
    elicit=LS,
    elicit_exact=Opt(LS),
    not_elicit=LS,
    after_success=LS,
    after_success_exact=Opt(LS),
    not_after_success=LS,
    matched_rules=LS,
    matched_rules_exact=Opt(LS),
    not_matched_rules=LS,
)
SPEC = obj(
    "SkillSpec",
    "schema id title description",
    schema=S,
    id=S,
    title=S,
    description=S,
    activation=Opt(obj("Activation", "summary", summary=S, keywords=LS, priority=OS)),
    applies_when=Seq(ANY),
    entry=Opt(
        obj(
            "Entry",
            "prompt",
            prompt=S,
            decision_required=B,
            supersedes_skills=LS,
            forbid_before_decision=LS,
            tool_boundary=Opt(TOOL_BOUNDARY),
        )
    ),
    routes=Seq(ROUTE),
    rules=Seq(RULE),
    states=Map(STATE),
    elicitations=Map(ELICITATION),
    trace=Opt(TRACE),
    dependencies=Map(DEPENDENCY),
    imports=Map(IMPORT),
    resources=Map(RESOURCE),
    code=Map(CODE),
    artifacts=Map(ARTIFACT),
    recipes=Map(RECIPE),
    commands=Map(COMMAND),
    snippets=Map(obj("Snippet", "text", text=S)),
    closures=Map(ANY),
    proof=Opt(obj("Proof", metrics=LS)),
    tests=Seq(obj("ScenarioTest", "name input expect", name=S, input=S, expect=EXPECTATION)),
    review_required=LS,
    metadata=Map(ANY),
)

# --------------------------------------------------------------------------- walker

_NULL_RE = re.compile(r"^(?:~|null|Null|NULL)$")
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")


def _same_number(raw: str, value: float) -> bool:
    """Whether ``raw`` spells ``value`` (so the source text can stand for it)."""
    for parse in (float, lambda t: int(t, 0)):
        try:
            if parse(raw) == value:
                return True
        except ValueError:
            continue
    return False


def backticked(names: list[str] | tuple[str, ...]) -> str:
    """``a``, ``b`` list as serde writes it after "expected"."""
    quoted = [f"`{n}`" for n in names]
    if not quoted:
        return "nothing"
    if len(quoted) == 1:
        return quoted[0]
    if len(quoted) == 2:
        return f"{quoted[0]} or {quoted[1]}"
    return "one of " + ", ".join(quoted)


def describe(value: Any) -> str:
    """What a value is, in the reference's "invalid type" words."""
    if value is None:
        return "unit value"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f'string "{value}"'
    if isinstance(value, list):
        return "sequence"
    return "map"


def expected_name(typ: Type) -> str:
    if isinstance(typ, Str):
        return "a string"
    if isinstance(typ, Bool):
        return "a boolean"
    if isinstance(typ, Int):
        return "u32" if typ.unsigned else "i64"
    if isinstance(typ, Seq):
        return "a sequence"
    if isinstance(typ, Map):
        return "a map"
    if isinstance(typ, Obj):
        return f"struct {typ.name}"
    if isinstance(typ, Enum):
        return "a variant name"
    if isinstance(typ, Untagged):
        return f"a {typ.name} mapping"
    if isinstance(typ, Opt):
        return expected_name(typ.inner)
    return "a value"


class StructureChecker:
    """Walks a parsed spec against :data:`SPEC`, collecting every structural error."""

    def __init__(self, text: str, file: str) -> None:
        self.lines = text.splitlines()
        self.file = file
        self.errors: list[Diagnostic] = []

    # -- helpers
    def error(self, message: str, loc: Location, path: str, code: str = "structure") -> None:
        self.errors.append(Diagnostic(message, loc, path=path, code=code))

    def raw(self, loc: Location) -> str:
        """The plain-scalar source text at ``loc`` (used to keep ``1.10`` as ``"1.10"``)."""
        if not 1 <= loc.line <= len(self.lines):
            return ""
        text = self.lines[loc.line - 1][max(loc.col - 1, 0) :]
        text = text.split(" #", 1)[0]
        for stop in ",]}":
            text = text.split(stop, 1)[0]
        return text.strip()

    def as_text(self, value: Any, loc: Location) -> str:
        raw = self.raw(loc)
        if value is None:
            return raw if _NULL_RE.match(raw) else ""
        if isinstance(value, bool):
            return raw if _BOOL_RE.match(raw) else str(value).lower()
        if isinstance(value, int | float):
            same = _same_number(raw, value)
            if same or (isinstance(value, float) and math.isnan(value) and "nan" in raw.lower()):
                return raw
            return str(value)
        return str(value)

    @staticmethod
    def empty_plain(value: Any, raw: str) -> bool:
        """An empty value (not an explicit ``~``/``null``), which serde reads as empty."""
        return value is None and not _NULL_RE.match(raw)

    # -- the walk
    def check(
        self,
        value: Any,
        typ: Type,
        path: str,
        loc: Location,
        strict: bool = False,
        anchor: Location | None = None,
    ) -> Any:
        """Check ``value`` against ``typ``; return the (possibly coerced) value.

        ``anchor`` is where the value's key sits: missing fields of a nested
        block mapping are reported on the key's line, which is where a reader
        looks, rather than on the mapping's first (present) key.
        """
        if isinstance(typ, Opt):
            if value is None:
                return None
            return self.check(value, typ.inner, path, loc, strict, anchor)
        if isinstance(typ, AnyValue):
            return value
        if isinstance(typ, Str):
            if isinstance(value, str):
                return value
            if isinstance(value, dict | list) or strict:
                self.error(f"invalid type: {describe(value)}, expected a string", loc, path)
                return value
            return self.as_text(value, loc)
        if isinstance(typ, Bool):
            if not isinstance(value, bool):
                self.error(f"invalid type: {describe(value)}, expected a boolean", loc, path)
            return value
        if isinstance(typ, Int):
            ok = isinstance(value, int) and not isinstance(value, bool)
            if ok and typ.unsigned and not 0 <= value < 2**32:
                self.error(f"invalid value: {describe(value)}, expected u32", loc, path)
            elif not ok:
                self.error(
                    f"invalid type: {describe(value)}, expected {expected_name(typ)}", loc, path
                )
            return value
        if isinstance(typ, Enum):
            text = value if isinstance(value, str) else None
            if text is None and not isinstance(value, dict | list):
                text = self.as_text(value, loc)
            if text is None:
                self.error(f"invalid type: {describe(value)}, expected a variant name", loc, path)
            elif text not in typ.values:
                self.error(
                    f"unknown variant `{text}`, expected {backticked(typ.values)}", loc, path
                )
            return value
        if value is None and not strict and self.empty_plain(value, self.raw(loc)):
            empty: Any = LocList(loc) if isinstance(typ, Seq) else LocDict(loc)
            return self.check(empty, typ, path, loc, anchor=anchor)
        if isinstance(typ, Seq):
            if not isinstance(value, list):
                self.error(f"invalid type: {describe(value)}, expected a sequence", loc, path)
                return value
            where = value.where if isinstance(value, LocList) else (lambda _i: loc)
            for i, item in enumerate(value):
                value[i] = self.check(item, typ.item, f"{path}[{i}]", where(i), strict)
            return value
        if not isinstance(value, dict):
            self.error(f"invalid type: {describe(value)}, expected {expected_name(typ)}", loc, path)
            return value
        if isinstance(typ, Map):
            for key in list(value):
                value[key] = self.check(
                    value[key],
                    typ.value,
                    f"{path}.{key}",
                    self._val_loc(value, key, loc),
                    strict,
                    self._key_loc(value, key, loc),
                )
            return value
        if isinstance(typ, Untagged):
            return self.check_untagged(value, typ, path, anchor or loc)
        return self.check_obj(value, typ, path, loc, strict, anchor or loc)

    @staticmethod
    def _val_loc(mapping: dict[str, Any], key: str, default: Location) -> Location:
        if isinstance(mapping, LocDict):
            return mapping.where_value(key)
        return default

    @staticmethod
    def _key_loc(mapping: dict[str, Any], key: str, default: Location) -> Location:
        if isinstance(mapping, LocDict):
            return mapping.where(key)
        return default

    def check_obj(
        self,
        value: dict[str, Any],
        typ: Obj,
        path: str,
        loc: Location,
        strict: bool,
        anchor: Location,
    ) -> Any:
        names = list(typ.fields)
        for key in list(value):
            child = f"{path}.{key}" if path else key
            if key not in typ.fields:
                self.error(
                    f"unknown field `{key}`, expected {backticked(names)}",
                    self._key_loc(value, key, loc),
                    path or key,
                    code="unknown_field",
                )
                continue
            value[key] = self.check(
                value[key],
                typ.fields[key],
                child,
                self._val_loc(value, key, loc),
                strict,
                self._key_loc(value, key, loc),
            )
        for key in names:
            if key in typ.required and key not in value:
                self.error(f"missing field `{key}`", anchor, path, code="missing_field")
        return value

    def check_untagged(self, value: dict[str, Any], typ: Untagged, path: str, loc: Location) -> Any:
        present = [k for k in typ.variants if k in value]
        if len(present) != 1:
            keys = backticked(list(typ.variants))
            what = "none" if not present else ", ".join(f"`{k}`" for k in present)
            self.error(
                f"data did not match any variant of untagged enum {typ.name}: "
                f"expected exactly one key of {keys}, found {what}",
                loc,
                path,
                code="untagged",
            )
            return value
        return self.check_obj(value, typ.variants[present[0]], path, loc, True, loc)


def check_structure(data: Any, text: str, file: str) -> list[Diagnostic]:
    """Every structural error of a parsed spec (unknown keys, types, missing fields)."""
    checker = StructureChecker(text, file)
    root = data.pos if isinstance(data, LocDict) else Location(file, 1, 1)
    if not isinstance(data, dict):
        checker.error(
            f"invalid type: {describe(data)}, expected struct SkillSpec", root, "", "structure"
        )
        return checker.errors
    checker.check(data, SPEC, "", root)
    return checker.errors
