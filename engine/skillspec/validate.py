"""Cross-reference rules of SkillSpec v0: every id a spec names must exist.

The reference stops at its first error; an author fixing a spec wants all of
them, so this module collects every finding, each with the location of the
offending value and its dotted path. The *message* keeps the reference's
wording and generic field name (``unknown reference "x" in rules.prefer``) so
verdicts and first errors can be compared with it line for line.

It runs on a structurally checked spec but stays defensive: a value of the
wrong type (already reported by :mod:`engine.skillspec.schema`) is skipped,
never crashes.
"""

from __future__ import annotations

from engine.errors import Diagnostic, Location
from engine.skillspec.imports import depth_first
from engine.skillspec.refwalk import RefWalk, obj_of, q, seq_of, string_of, strings_of

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

SCHEMA = "skillspec/v0"


class Validator(RefWalk):
    """Collects cross-reference diagnostics for one parsed spec."""

    def __init__(self, data: dict[str, Any], file: str) -> None:
        super().__init__(data, file)
        d = data
        self.routes = {
            r["id"] for r in seq_of(d.get("routes")) if isinstance(obj_of(r).get("id"), str)
        }
        self.rules = {
            r["id"] for r in seq_of(d.get("rules")) if isinstance(obj_of(r).get("id"), str)
        }
        self.ids: dict[str, set[str]] = {
            name: set(obj_of(d.get(name)))
            for name in (
                "states",
                "elicitations",
                "dependencies",
                "imports",
                "resources",
                "code",
                "artifacts",
                "recipes",
                "commands",
                "snippets",
                "closures",
            )
        }
        self.ids["route"] = self.routes
        self.ids["rule"] = self.rules
        self.actions = (
            self.ids["commands"] | self.ids["recipes"] | self.ids["code"] | self.ids["closures"]
        )

    # ------------------------------------------------------------------ rules
    def run(self) -> None:
        self.header()
        self.routes_()
        self.elicitations()
        self.trace()
        self.dependencies()
        self.imports()
        self.resources()
        self.code()
        self.artifacts()
        self.recipes()
        self.rules_()
        self.states()
        self.commands()
        self.tests()

    def header(self) -> None:
        d = self.data
        schema = d.get("schema")
        if isinstance(schema, str) and schema != SCHEMA:
            self.err(
                f"unsupported schema {q(schema)}; expected {SCHEMA}",
                self.val_loc(d, "schema", self.root),
                "schema",
                "unsupported_schema",
            )
        for name in ("id", "title", "description"):
            value = d.get(name)
            if isinstance(value, str) and not value.strip():
                self.missing(name, self.val_loc(d, name, self.root), name)
        for value, loc, path in self.one(d, "id", ""):
            if value.strip():
                self.identifier("id", value, loc, path.lstrip("."))

    def routes_(self) -> None:
        items: list[tuple[str, Location, str]] = []
        for i, route in enumerate(seq_of(self.data.get("routes"))):
            items.extend(self.one(route, "id", f"routes[{i}]"))
            plan = obj_of(obj_of(route).get("execution_plan"))
            phase_ids = {
                p["id"]
                for p in seq_of(plan.get("phases"))
                if isinstance(p, dict) and isinstance(p.get("id"), str)
            }
            for j, phase in enumerate(seq_of(plan.get("phases"))):
                base = f"routes[{i}].execution_plan.phases[{j}]"
                # Not checked by the reference: reported as warnings so verdicts still agree.
                for value, loc, path in self.one(phase, "route", base):
                    if value not in self.routes:
                        self.warn(
                            f"phase route {q(value)} is not a declared route", loc, path, "phase"
                        )
                for k, jump in enumerate(seq_of(obj_of(phase).get("jumps"))):
                    for value, loc, path in self.one(jump, "to_phase", f"{base}.jumps[{k}]"):
                        if value not in phase_ids:
                            self.warn(
                                f"jump target {q(value)} is not a phase of this plan",
                                loc,
                                path,
                                "phase",
                            )
        self.unique("routes.id", items)

    def elicitations(self) -> None:
        for eid, el, kloc, base in self.entries("elicitations"):
            self.identifier("elicitations key", eid, kloc, base)
            el = obj_of(el)
            for value, loc, path in self.one(el, "question", base):
                if not value.strip():
                    self.missing("elicitations.question", loc, path)
            choices = el.get("choices")
            if isinstance(choices, list) and not choices:
                self.missing("elicitations.choices", self.val_loc(el, "choices", kloc), base)
            ids: list[tuple[str, Location, str]] = []
            for i, choice in enumerate(seq_of(choices)):
                cbase = f"{base}.choices[{i}]"
                ids.extend(self.one(choice, "id", cbase))
                for value, loc, path in self.one(choice, "label", cbase):
                    if not value.strip():
                        self.missing("elicitations.choices.label", loc, path)
                self.known_one(self.routes, "elicitations.choices.route", choice, "route", cbase)
                self.known_one(
                    self.ids["states"], "elicitations.choices.next", choice, "next", cbase
                )
            self.unique("elicitations.choices.id", ids)
            choice_ids = {v for v, _, _ in ids}
            self.known_one(choice_ids, "elicitations.default", el, "default", base)
            for i, cond in enumerate(seq_of(el.get("required_when"))):
                cbase = f"{base}.required_when[{i}]"
                self.known_one(
                    self.routes, "elicitations.required_when.route", cond, "route", cbase
                )
                for value, loc, path in self.one(cond, "missing", cbase):
                    self.identifier("elicitations.required_when.missing", value, loc, path)

    def trace(self) -> None:
        trace = obj_of(self.data.get("trace"))
        self.unique("trace.record", list(self.many(trace, "record", "trace")), check_ident=False)

    def dependencies(self) -> None:
        for did, dep, kloc, base in self.entries("dependencies"):
            self.identifier("dependencies key", did, kloc, base)
            dep = obj_of(dep)
            for name in ("command", "path", "env"):
                for value, loc, path in self.one(dep, name, base):
                    if value == "":
                        self.missing(f"dependencies.{name}", loc, path)
                for value, loc, path in self.one(obj_of(dep.get("check")), name, f"{base}.check"):
                    if value == "":
                        self.missing(f"dependencies.check.{name}", loc, path)
            provision = obj_of(dep.get("provision"))
            self.known_one(
                self.ids["elicitations"],
                "dependencies.provision.elicit",
                provision,
                "elicit",
                f"{base}.provision",
            )
            ids: list[tuple[str, Location, str]] = []
            for i, option in enumerate(seq_of(provision.get("options"))):
                obase = f"{base}.provision.options[{i}]"
                ids.extend(self.one(option, "id", obase))
                for value, loc, path in self.one(option, "label", obase):
                    if not value.strip():
                        self.missing("dependencies.provision.options.label", loc, path)
            self.unique("dependencies.provision.options.id", ids)

    def use_refs(self, section: str, obj: dict[str, Any], base: str) -> None:
        kinds = {
            "route": self.routes,
            "rule": self.rules,
            "state": self.ids["states"],
            "elicitation": self.ids["elicitations"],
            "dependency": self.ids["dependencies"],
            "command": self.ids["commands"],
            "code": self.ids["code"],
            "artifact": self.ids["artifacts"],
            "recipe": self.ids["recipes"],
            "snippet": self.ids["snippets"],
        }
        for i, use in enumerate(seq_of(obj.get("used_by"))):
            kind = obj_of(use).get("kind")
            if isinstance(kind, str) and kind in kinds:  # a mapping here is unhashable
                self.known_one(kinds[kind], f"{section}.used_by", use, "id", f"{base}.used_by[{i}]")

    def import_references(self) -> set[str]:
        refs: set[str] = set()
        for imp in self.section("imports"):
            refs.update(strings_of(obj_of(imp).get("requires"), "imports"))
        for code in self.section("code"):
            refs.update(strings_of(obj_of(code).get("requires"), "imports"))
        for recipe in self.section("recipes"):
            recipe = obj_of(recipe)
            refs.update(strings_of(recipe.get("requires"), "imports"))
            for step in seq_of(recipe.get("steps")):
                refs.update(string_of(step, "load_import"))
        return refs

    def resource_references(self) -> set[str]:
        refs: set[str] = set()
        for code in self.section("code"):
            code = obj_of(code)
            refs.update(string_of(code.get("source"), "from_resource"))
            refs.update(strings_of(code.get("requires"), "resources"))
        for recipe in self.section("recipes"):
            recipe = obj_of(recipe)
            refs.update(strings_of(recipe.get("requires"), "resources"))
            for step in seq_of(recipe.get("steps")):
                refs.update(string_of(step, "load_resource"))
        for command in self.section("commands"):
            refs.update(strings_of(obj_of(command).get("requires"), "resources"))
        return refs

    def section(self, name: str) -> Iterable[Any]:
        """The entries of a map section (as :meth:`entries` walks them), without their places."""
        return obj_of(self.data.get(name)).values()

    def imports(self) -> None:
        referenced = self.import_references()
        for iid, imp, kloc, base in self.entries("imports"):
            self.identifier("imports key", iid, kloc, base)
            imp = obj_of(imp)
            for value, loc, path in self.one(imp, "path", base):
                if not value.strip():
                    self.missing("imports.path", loc, path)
            for value, loc, path in self.one(imp, "section", base):
                if value == "":
                    self.missing("imports.section", loc, path)
            self.known_many(
                self.ids["imports"],
                "imports.requires.imports",
                imp.get("requires"),
                "imports",
                f"{base}.requires",
            )
            self.use_refs("imports", imp, base)
            if (
                iid not in referenced
                and not seq_of(imp.get("used_by"))
                and imp.get("load") != "always"
            ):
                self.unknown("imports.orphan", iid, kloc, base)
        self.import_cycles()

    def import_cycles(self) -> None:
        """Depth-first over imports in key order, as the reference walks them."""
        imports = obj_of(self.data.get("imports"))

        def children(node: str) -> list[str]:
            return strings_of(obj_of(imports.get(node)).get("requires"), "imports")

        for cycle in depth_first(sorted(imports), children)[1]:
            start = cycle[0]
            self.errors.append(
                Diagnostic(
                    f"unknown reference {q(cycle[-1])} in imports.requires.imports.cycle",
                    self.key_loc(imports, start, self.root),
                    path=f"imports.{start}.requires.imports",
                    code="import_cycle",
                    hint="import cycle: " + " -> ".join(cycle),
                )
            )

    def resources(self) -> None:
        referenced = self.resource_references()
        for rid, res, kloc, base in self.entries("resources"):
            self.identifier("resources key", rid, kloc, base)
            res = obj_of(res)
            for value, loc, path in self.one(res, "path", base):
                if not value.strip():
                    self.missing("resources.path", loc, path)
            self.use_refs("resources", res, base)
            if rid not in referenced and not seq_of(res.get("used_by")):
                self.unknown("resources.orphan", rid, kloc, base)

    def code(self) -> None:
        for cid, code, kloc, base in self.entries("code"):
            self.identifier("code key", cid, kloc, base)
            code = obj_of(code)
            for value, loc, path in self.one(code, "language", base):
                if not value.strip():
                    self.missing("code.language", loc, path)
            source = obj_of(code.get("source"))
            for name in ("inline", "file"):
                for value, loc, path in self.one(source, name, f"{base}.source"):
                    if not value.strip():
                        self.missing(f"code.source.{name}", loc, path)
            if "file" in source:
                self.known_one(
                    self.ids["resources"],
                    "code.source.from_resource",
                    source,
                    "from_resource",
                    f"{base}.source",
                )
            prov = code.get("provenance")
            if isinstance(prov, dict):
                ploc = self.key_loc(code, "provenance", kloc)
                has_res, has_imp = prov.get("resource") is not None, prov.get("import") is not None
                if has_res and has_imp:
                    self.err(
                        f"unknown reference {q('resource and import both set')} "
                        "in code.provenance.resource_or_import",
                        ploc,
                        f"{base}.provenance",
                        "provenance",
                    )
                elif not has_res and not has_imp:
                    self.missing("code.provenance.resource_or_import", ploc, f"{base}.provenance")
                else:
                    pbase = f"{base}.provenance"
                    self.known_one(
                        self.ids["resources"], "code.provenance.resource", prov, "resource", pbase
                    )
                    self.known_one(
                        self.ids["imports"], "code.provenance.import", prov, "import", pbase
                    )
            req = code.get("requires")
            rbase = f"{base}.requires"
            for name in ("dependencies", "imports", "resources", "artifacts"):
                self.known_many(self.ids[name], f"code.requires.{name}", req, name, rbase)
            for name in ("inputs", "outputs"):
                self.known_many(self.ids["artifacts"], "code.inputs.outputs", code, name, base)

    def exec_refs(self, obj: dict[str, Any], key: str, base: str) -> None:
        kinds = {"command": "commands", "code": "code", "recipe": "recipes"}
        for i, ref in enumerate(seq_of(obj.get(key))):
            kind = obj_of(ref).get("kind")
            if isinstance(kind, str) and kind in kinds:  # a mapping here is unhashable
                self.known_one(
                    self.ids[kinds[kind]], f"artifacts.{key}", ref, "id", f"{base}.{key}[{i}]"
                )

    def artifacts(self) -> None:
        for aid, art, kloc, base in self.entries("artifacts"):
            self.identifier("artifacts key", aid, kloc, base)
            art = obj_of(art)
            for value, loc, path in self.one(art, "path", base):
                if value == "":
                    self.missing("artifacts.path", loc, path)
            self.exec_refs(art, "produced_by", base)
            self.exec_refs(art, "consumed_by", base)

    def recipes(self) -> None:
        step_targets = {
            "load_import": (self.ids["imports"], "recipes.steps.load_import"),
            "load_resource": (self.ids["resources"], "recipes.steps.load_resource"),
            "run_command": (self.ids["commands"], "recipes.steps.run_command"),
            "run_code": (self.ids["code"], "recipes.steps.run_code"),
            "produce_artifact": (self.ids["artifacts"], "recipes.steps.produce_artifact"),
            "consume_artifact": (self.ids["artifacts"], "recipes.steps.consume_artifact"),
            "ask": (self.ids["elicitations"], "recipes.steps.ask"),
        }
        branch_targets = self.ids["commands"] | self.ids["code"] | self.ids["recipes"]
        for rid, recipe, kloc, base in self.entries("recipes"):
            self.identifier("recipes key", rid, kloc, base)
            recipe = obj_of(recipe)
            req = recipe.get("requires")
            for name in ("resources", "imports", "dependencies", "artifacts"):
                self.known_many(
                    self.ids[name], f"recipes.requires.{name}", req, name, f"{base}.requires"
                )
            for i, step in enumerate(seq_of(recipe.get("steps"))):
                sbase = f"{base}.steps[{i}]"
                if not isinstance(step, dict) or len(step) != 1:
                    continue
                (kind,) = step  # its one key: the only target it can name
                if kind in step_targets:
                    known, field = step_targets[kind]
                    self.known_one(known, field, step, kind, sbase)
                if kind == "note":
                    for value, loc, path in self.one(step, "note", sbase):
                        if not value.strip():
                            self.missing("recipes.steps.note", loc, path)
                if kind != "branch":
                    continue
                branch = obj_of(step["branch"])
                for value, loc, path in self.one(branch, "if", f"{sbase}.branch"):
                    if not value.strip():
                        self.missing("recipes.steps.branch.if", loc, path)
                for name in ("then", "otherwise"):
                    self.known_one(
                        branch_targets,
                        f"recipes.steps.branch.{name}",
                        branch,
                        name,
                        f"{sbase}.branch",
                    )

    def rules_(self) -> None:
        items: list[tuple[str, Location, str]] = []
        for i, rule in enumerate(seq_of(self.data.get("rules"))):
            base = f"rules[{i}]"
            items.extend(self.one(rule, "id", base))
            self.known_one(self.routes, "rules.prefer", rule, "prefer", base)
            self.known_many(self.routes, "rules.route_order", rule, "route_order", base)
            self.known_many(self.ids["elicitations"], "rules.elicit", rule, "elicit", base)
            self.known_many(self.actions, "rules.after_success", rule, "after_success", base)
        self.unique("rules.id", items)

    def states(self) -> None:
        states = self.ids["states"]
        for sid, state, kloc, base in self.entries("states"):
            self.identifier("states key", sid, kloc, base)
            self.known_many(self.actions, "states.do", state, "do", base)
            for name in ("next", "yes", "no"):
                self.known_one(states, f"states.{name}", state, name, base)
            self.known_one(self.ids["snippets"], "states.say", state, "say", base)
            self.known_one(self.ids["elicitations"], "states.ask", state, "ask", base)

    def commands(self) -> None:
        for cid, command, kloc, base in self.entries("commands"):
            self.identifier("commands key", cid, kloc, base)
            req = obj_of(command).get("requires")
            rbase = f"{base}.requires"
            self.known_many(
                self.ids["dependencies"],
                "commands.requires.dependencies",
                req,
                "dependencies",
                rbase,
            )
            self.known_many(
                self.ids["resources"], "commands.requires.resources", req, "resources", rbase
            )

    def tests(self) -> None:
        for i, test in enumerate(seq_of(self.data.get("tests"))):
            base = f"tests[{i}]"
            expect = obj_of(obj_of(test).get("expect"))
            ebase = f"{base}.expect"
            if not has_assertions(expect):
                loc = self.val_loc(test, "expect", self.key_loc(test, "expect", self.root))
                self.missing("tests.expect assertion", loc, ebase)
            self.known_one(self.routes, "tests.expect.route", expect, "route", ebase)
            self.known_many(self.routes, "tests.expect.route_order", expect, "route_order", ebase)
            for stem, known in (
                ("after_success", self.actions),
                ("elicit", self.ids["elicitations"]),
                ("matched_rules", self.rules),
            ):
                for name in (stem, f"{stem}_exact", f"not_{stem}"):
                    self.known_many(known, f"tests.expect.{name}", expect, name, ebase)


def _ids(items: Any) -> set[str]:
    """The string ``id`` of each mapping in the list ``items``."""
    return {r["id"] for r in seq_of(items) if isinstance(obj_of(r).get("id"), str)}


def has_assertions(expect: dict[str, Any]) -> bool:
    """An expectation asserts something: a route, a non-empty list, or any ``*_exact``."""
    for key, value in expect.items():
        if key.endswith("_exact") or key == "route":
            if value is not None:
                return True
        elif isinstance(value, list) and value:
            return True
    return False


def validate_refs(data: dict[str, Any], file: str) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """Errors and warnings from every cross-reference rule of the grammar."""
    validator = Validator(data, file)
    validator.run()
    return validator.errors, validator.warnings
