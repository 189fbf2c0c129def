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
from engine.yamlsrc import LocDict, LocList

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

SCHEMA = "skillspec/v0"


def q(value: str) -> str:
    """A value quoted the way the reference's messages quote it.

    ``json`` is imported here, on the first message: a spec that validates never loads it.
    """
    import json

    return json.dumps(value, ensure_ascii=False)


_IDENTIFIER_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789_-."


def is_identifier(value: str) -> bool:
    """Lower-case ASCII letter first, then lower-case letters, digits, ``_ - .``."""
    if not value or not ("a" <= value[0] <= "z"):
        return False
    return not value.strip(_IDENTIFIER_CHARACTERS)  # (what strip leaves is not one of them)


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _seq(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _string(obj: Any, key: str) -> list[str]:
    """``obj[key]`` if it is a string (what :meth:`Validator.one` yields), as a list."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return [value] if isinstance(value, str) else []


def _strings(obj: Any, key: str) -> list[str]:
    """The string items of the list ``obj[key]`` (what :meth:`Validator.many` yields)."""
    items = obj.get(key) if isinstance(obj, dict) else None
    return [item for item in items if isinstance(item, str)] if isinstance(items, list) else []


class Validator:
    """Collects cross-reference diagnostics for one parsed spec."""

    def __init__(self, data: dict[str, Any], file: str) -> None:
        self.data = data
        self.file = file
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.root = data.pos if isinstance(data, LocDict) else Location(file, 1, 1)
        d = data
        self.routes = {r["id"] for r in _seq(d.get("routes")) if isinstance(_obj(r).get("id"), str)}
        self.rules = {r["id"] for r in _seq(d.get("rules")) if isinstance(_obj(r).get("id"), str)}
        self.ids: dict[str, set[str]] = {
            name: set(_map(d.get(name)))
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

    # ------------------------------------------------------------------ reporting
    def err(self, message: str, loc: Location, path: str, code: str) -> None:
        self.errors.append(Diagnostic(message, loc, path=path, code=code))

    def warn(self, message: str, loc: Location, path: str, code: str) -> None:
        self.warnings.append(Diagnostic(message, loc, path=path, severity="warning", code=code))

    def unknown(self, field: str, value: str, loc: Location, path: str) -> None:
        self.err(f"unknown reference {q(value)} in {field}", loc, path, "unknown_reference")

    def missing(self, field: str, loc: Location, path: str) -> None:
        self.err(f"spec is missing required field {field}", loc, path, "missing_field")

    def identifier(self, field: str, value: str, loc: Location, path: str) -> None:
        if not is_identifier(value):
            self.err(f"invalid identifier {q(value)} in {field}", loc, path, "invalid_identifier")

    # ------------------------------------------------------------------ access
    @staticmethod
    def key_loc(mapping: Any, key: str, default: Location) -> Location:
        return mapping.where(key) if isinstance(mapping, LocDict) else default

    @staticmethod
    def val_loc(mapping: Any, key: str, default: Location) -> Location:
        return mapping.where_value(key) if isinstance(mapping, LocDict) else default

    def one(self, obj: Any, key: str, path: str) -> Iterator[tuple[str, Location, str]]:
        """The string at ``obj[key]`` if there is one, with its location and path."""
        if isinstance(obj, dict) and isinstance(obj.get(key), str):
            yield obj[key], self.val_loc(obj, key, self.root), f"{path}.{key}"

    def many(self, obj: Any, key: str, path: str) -> Iterator[tuple[str, Location, str]]:
        """Each string item of the list ``obj[key]``, with its location and path."""
        if not isinstance(obj, dict):
            return
        items = obj.get(key)
        if not isinstance(items, list):
            return
        base = self.val_loc(obj, key, self.root)
        for i, item in enumerate(items):
            if isinstance(item, str):
                loc = items.where(i) if isinstance(items, LocList) else base
                yield item, loc, f"{path}.{key}[{i}]"

    def entries(self, section: str) -> Iterator[tuple[str, Any, Location, str]]:
        """``(id, value, key location, path)`` for each entry of a map section."""
        mapping = self.data.get(section)
        if not isinstance(mapping, dict):
            return
        for key, value in mapping.items():
            yield key, value, self.key_loc(mapping, key, self.root), f"{section}.{key}"

    def known_one(self, known: set[str], field: str, obj: Any, key: str, path: str) -> None:
        """``obj[key]``, when a string, names one of ``known``: an unknown reference otherwise.

        As :meth:`one` then a check of each, but the location and path are
        only made for a finding (most references are known).
        """
        if isinstance(obj, dict):
            value = obj.get(key)
            if isinstance(value, str) and value not in known:
                self.unknown(field, value, self.val_loc(obj, key, self.root), f"{path}.{key}")

    def known_many(self, known: set[str], field: str, obj: Any, key: str, path: str) -> None:
        """Each string item of the list ``obj[key]`` names one of ``known`` (as :meth:`many`)."""
        items = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(items, list):
            return
        for i, item in enumerate(items):
            if isinstance(item, str) and item not in known:
                if isinstance(items, LocList):
                    loc = items.where(i)
                else:
                    loc = self.val_loc(obj, key, self.root)
                self.unknown(field, item, loc, f"{path}.{key}[{i}]")

    def unique(
        self, field: str, items: list[tuple[str, Location, str]], check_ident: bool = True
    ) -> None:
        seen: set[str] = set()
        for value, loc, path in items:
            if check_ident:
                self.identifier(field, value, loc, path)
            if value in seen:
                self.err(f"duplicate identifier {q(value)} in {field}", loc, path, "duplicate_id")
            seen.add(value)

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
        for i, route in enumerate(_seq(self.data.get("routes"))):
            items.extend(self.one(route, "id", f"routes[{i}]"))
            plan = _obj(_obj(route).get("execution_plan"))
            phase_ids = {
                p["id"]
                for p in _seq(plan.get("phases"))
                if isinstance(p, dict) and isinstance(p.get("id"), str)
            }
            for j, phase in enumerate(_seq(plan.get("phases"))):
                base = f"routes[{i}].execution_plan.phases[{j}]"
                # Not checked by the reference: reported as warnings so verdicts still agree.
                for value, loc, path in self.one(phase, "route", base):
                    if value not in self.routes:
                        self.warn(
                            f"phase route {q(value)} is not a declared route", loc, path, "phase"
                        )
                for k, jump in enumerate(_seq(_obj(phase).get("jumps"))):
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
            el = _obj(el)
            for value, loc, path in self.one(el, "question", base):
                if not value.strip():
                    self.missing("elicitations.question", loc, path)
            choices = el.get("choices")
            if isinstance(choices, list) and not choices:
                self.missing("elicitations.choices", self.val_loc(el, "choices", kloc), base)
            ids: list[tuple[str, Location, str]] = []
            for i, choice in enumerate(_seq(choices)):
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
            for i, cond in enumerate(_seq(el.get("required_when"))):
                cbase = f"{base}.required_when[{i}]"
                self.known_one(
                    self.routes, "elicitations.required_when.route", cond, "route", cbase
                )
                for value, loc, path in self.one(cond, "missing", cbase):
                    self.identifier("elicitations.required_when.missing", value, loc, path)

    def trace(self) -> None:
        trace = _obj(self.data.get("trace"))
        self.unique("trace.record", list(self.many(trace, "record", "trace")), check_ident=False)

    def dependencies(self) -> None:
        for did, dep, kloc, base in self.entries("dependencies"):
            self.identifier("dependencies key", did, kloc, base)
            dep = _obj(dep)
            for name in ("command", "path", "env"):
                for value, loc, path in self.one(dep, name, base):
                    if value == "":
                        self.missing(f"dependencies.{name}", loc, path)
                for value, loc, path in self.one(_obj(dep.get("check")), name, f"{base}.check"):
                    if value == "":
                        self.missing(f"dependencies.check.{name}", loc, path)
            provision = _obj(dep.get("provision"))
            self.known_one(
                self.ids["elicitations"],
                "dependencies.provision.elicit",
                provision,
                "elicit",
                f"{base}.provision",
            )
            ids: list[tuple[str, Location, str]] = []
            for i, option in enumerate(_seq(provision.get("options"))):
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
        for i, use in enumerate(_seq(obj.get("used_by"))):
            kind = _obj(use).get("kind")
            if isinstance(kind, str) and kind in kinds:  # a mapping here is unhashable
                self.known_one(kinds[kind], f"{section}.used_by", use, "id", f"{base}.used_by[{i}]")

    def import_references(self) -> set[str]:
        refs: set[str] = set()
        for imp in self.section("imports"):
            refs.update(_strings(_obj(imp).get("requires"), "imports"))
        for code in self.section("code"):
            refs.update(_strings(_obj(code).get("requires"), "imports"))
        for recipe in self.section("recipes"):
            recipe = _obj(recipe)
            refs.update(_strings(recipe.get("requires"), "imports"))
            for step in _seq(recipe.get("steps")):
                refs.update(_string(step, "load_import"))
        return refs

    def resource_references(self) -> set[str]:
        refs: set[str] = set()
        for code in self.section("code"):
            code = _obj(code)
            refs.update(_string(code.get("source"), "from_resource"))
            refs.update(_strings(code.get("requires"), "resources"))
        for recipe in self.section("recipes"):
            recipe = _obj(recipe)
            refs.update(_strings(recipe.get("requires"), "resources"))
            for step in _seq(recipe.get("steps")):
                refs.update(_string(step, "load_resource"))
        for command in self.section("commands"):
            refs.update(_strings(_obj(command).get("requires"), "resources"))
        return refs

    def section(self, name: str) -> Iterable[Any]:
        """The entries of a map section (as :meth:`entries` walks them), without their places."""
        return _map(self.data.get(name)).values()

    def imports(self) -> None:
        referenced = self.import_references()
        for iid, imp, kloc, base in self.entries("imports"):
            self.identifier("imports key", iid, kloc, base)
            imp = _obj(imp)
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
                and not _seq(imp.get("used_by"))
                and imp.get("load") != "always"
            ):
                self.unknown("imports.orphan", iid, kloc, base)
        self.import_cycles()

    def import_cycles(self) -> None:
        """Depth-first over imports in key order, as the reference walks them."""
        imports = _map(self.data.get("imports"))

        def children(node: str) -> list[str]:
            return _strings(_obj(imports.get(node)).get("requires"), "imports")

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
            res = _obj(res)
            for value, loc, path in self.one(res, "path", base):
                if not value.strip():
                    self.missing("resources.path", loc, path)
            self.use_refs("resources", res, base)
            if rid not in referenced and not _seq(res.get("used_by")):
                self.unknown("resources.orphan", rid, kloc, base)

    def code(self) -> None:
        for cid, code, kloc, base in self.entries("code"):
            self.identifier("code key", cid, kloc, base)
            code = _obj(code)
            for value, loc, path in self.one(code, "language", base):
                if not value.strip():
                    self.missing("code.language", loc, path)
            source = _obj(code.get("source"))
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
        for i, ref in enumerate(_seq(obj.get(key))):
            kind = _obj(ref).get("kind")
            if isinstance(kind, str) and kind in kinds:  # a mapping here is unhashable
                self.known_one(
                    self.ids[kinds[kind]], f"artifacts.{key}", ref, "id", f"{base}.{key}[{i}]"
                )

    def artifacts(self) -> None:
        for aid, art, kloc, base in self.entries("artifacts"):
            self.identifier("artifacts key", aid, kloc, base)
            art = _obj(art)
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
            recipe = _obj(recipe)
            req = recipe.get("requires")
            for name in ("resources", "imports", "dependencies", "artifacts"):
                self.known_many(
                    self.ids[name], f"recipes.requires.{name}", req, name, f"{base}.requires"
                )
            for i, step in enumerate(_seq(recipe.get("steps"))):
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
                branch = _obj(step["branch"])
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
        for i, rule in enumerate(_seq(self.data.get("rules"))):
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
            req = _obj(command).get("requires")
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
        for i, test in enumerate(_seq(self.data.get("tests"))):
            base = f"tests[{i}]"
            expect = _obj(_obj(test).get("expect"))
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
