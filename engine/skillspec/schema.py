"""The SkillSpec v0 grammar as data: every object, its keys, their types, which are required.

Why a table instead of classes: the reference deserialises into structs that
deny unknown fields, so every typo is an error. Expressing the grammar as data
lets one small walker (:mod:`engine.skillspec.structure`) report *all* such
errors at once (the reference stops at the first), each at the key's own
file:line:col, with the dotted path. Free-form values (metadata, allow, choice
``sets``, ``success_when``, artifact schemas, closures, ``applies_when``
entries) are :class:`AnyValue`; everything else is closed.
"""

from __future__ import annotations

from engine.record import Record

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Final

# --------------------------------------------------------------------------- types
#
# Records rather than frozen dataclasses: every ``skillspec validate`` imports
# this module, and generating ten dataclasses cost it about as much start-up
# time as checking the structure of a large spec.


class Str(Record):
    """A string; non-string scalars are read as their source text."""

    __slots__ = ()


class Bool(Record):
    """``true`` or ``false`` only."""

    __slots__ = ()


class Int(Record):
    """An integer (``unsigned`` for the reference's u32 fields)."""

    __slots__ = ("unsigned",)
    __match_args__ = ("unsigned",)

    def __init__(self, unsigned: bool = False) -> None:
        self.unsigned: Final = unsigned


class AnyValue(Record):
    """Free-form YAML: metadata, allow values, choice sets, schemas, closures."""

    __slots__ = ()


class Enum(Record):
    """One of a fixed set of snake_case names."""

    __slots__ = ("values",)
    __match_args__ = ("values",)

    def __init__(self, values: tuple[str, ...]) -> None:
        self.values: Final = values


class Seq(Record):
    """A sequence whose items are all of one type."""

    __slots__ = ("item",)
    __match_args__ = ("item",)

    def __init__(self, item: Type) -> None:
        self.item: Final = item


class Map(Record):
    """A mapping from free keys (ids) to values of one type."""

    __slots__ = ("value",)
    __match_args__ = ("value",)

    def __init__(self, value: Type) -> None:
        self.value: Final = value


class Opt(Record):
    """``Option<T>``: any null is ``None``."""

    __slots__ = ("inner",)
    __match_args__ = ("inner",)

    def __init__(self, inner: Type) -> None:
        self.inner: Final = inner


class Obj(Record):
    """A struct with a closed set of keys; ``required`` keys must be present."""

    __slots__ = ("fields", "name", "required")
    __match_args__ = ("name", "fields", "required")

    def __init__(
        self, name: str, fields: dict[str, Type], required: frozenset[str] = frozenset()
    ) -> None:
        self.name: Final = name
        self.fields: Final = fields
        self.required: Final = required


class Untagged(Record):
    """A union picked by which discriminating key is present (code source, recipe step)."""

    __slots__ = ("name", "variants")
    __match_args__ = ("name", "variants")

    def __init__(self, name: str, variants: dict[str, Obj]) -> None:
        self.name: Final = name
        self.variants: Final = variants  # discriminating key -> variant


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
#: The trace event kinds a spec may record (and a trace line may carry).
TRACE_EVENT_KINDS: tuple[str, ...] = (
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
