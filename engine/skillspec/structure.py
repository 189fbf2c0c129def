"""A strict walk of a parsed spec over the grammar table, collecting every structural error.

Scalar coercion follows the reference's YAML reader (serde_yaml 0.9):

* a ``String`` field accepts any scalar and keeps its source text (``id: 42``
  is the string ``"42"``), except inside the two "untagged" unions (code
  source, recipe step), where the value must already be a string;
* a ``bool`` field accepts only ``true``/``false``; ``yes``/``no`` are strings
  under YAML 1.2 and therefore a type error;
* an empty value (``routes:`` with nothing after it) is an empty list/map/
  object, while ``~``/``null`` there is a type error; an ``Option`` is ``None``
  for any null.

The walker rewrites coerced string scalars (and empty values) in place, so
downstream code (decide, tests) can rely on string fields being ``str`` and
list fields being lists.
"""

from __future__ import annotations

from engine.errors import Diagnostic, Location
from engine.skillspec.schema import (
    SPEC,
    AnyValue,
    Bool,
    Enum,
    Int,
    Map,
    Obj,
    Opt,
    Seq,
    Str,
    Type,
    Untagged,
)
from engine.yamlscalars import INT64_MIN, UINT64_MAX
from engine.yamlsrc import LocDict, LocList

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any

    #: Where a checked value sits, made a Location only when a finding or a scalar's source
    #: text needs one (most values need none): its LocDict and key, its LocList and index,
    #: or None and the Location itself (the root, and the children of a plain container).
    _Site = tuple[Any, Any]

#: The source spellings of null and of the booleans in YAML 1.2's core schema (a plain
#: scalar's stripped source text, which holds no line break, is one of them or not).
_NULLS = frozenset(("~", "null", "Null", "NULL"))
_BOOLS = frozenset(("true", "True", "TRUE", "false", "False", "FALSE"))


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


def _at(site: _Site) -> Location:
    """Where the value at ``site`` sits."""
    container, key = site
    if container is None:
        return key  # type: ignore[no-any-return]  # (None, the Location itself)
    return container.where(key) if isinstance(container, LocList) else container.where_value(key)


def _key_at(site: _Site) -> Location:
    """Where the key of the value at ``site`` sits (a sequence item's: the item's own)."""
    container, key = site
    if isinstance(container, LocDict):
        return container.where(key)
    return _at(site)


class StructureChecker:
    """Walks a parsed spec against :data:`SPEC`, collecting every structural error."""

    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self._lines: list[str] | None = None
        self.file = file
        self.errors: list[Diagnostic] = []

    # -- helpers
    def error(self, message: str, loc: Location, path: str, code: str = "structure") -> None:
        self.errors.append(Diagnostic(message, loc, path=path, code=code))

    def raw(self, loc: Location) -> str:
        """The plain-scalar source text at ``loc`` (used to keep ``1.10`` as ``"1.10"``)."""
        if self._lines is None:  # split on first need: most specs never need a line
            self._lines = self.text.splitlines()
        lines = self._lines
        if not 1 <= loc.line <= len(lines):
            return ""
        text = lines[loc.line - 1][max(loc.col - 1, 0) :]
        text = text.split(" #", 1)[0]
        for stop in ",]}":
            text = text.split(stop, 1)[0]
        return text.strip()

    def as_text(self, value: Any, loc: Location) -> str:
        raw = self.raw(loc)
        if value is None:
            return raw if raw in _NULLS else ""
        if isinstance(value, bool):
            return raw if raw in _BOOLS else str(value).lower()
        if isinstance(value, int | float):
            same = _same_number(raw, value)
            nan = isinstance(value, float) and value != value  # (only NaN differs from itself)
            if same or (nan and "nan" in raw.lower()):
                return raw
            return str(value)
        return str(value)

    @staticmethod
    def empty_plain(value: Any, raw: str) -> bool:
        """An empty value (not an explicit ``~``/``null``), which serde reads as empty."""
        return value is None and raw not in _NULLS

    # -- the walk
    def check(
        self,
        value: Any,
        typ: Type,
        path: str,
        at: _Site,
        strict: bool = False,
        key_at: _Site | None = None,
    ) -> Any:
        """Check ``value`` against ``typ``; return the (possibly coerced) value.

        ``at`` is where the value sits, ``key_at`` where its key does:
        missing fields of a nested block mapping are reported on the key's
        line, which is where a reader looks, rather than on the mapping's
        first (present) key.
        """
        if typ.__class__ is Str and value.__class__ is str:
            return value  # the commonest case by far: a string where a string belongs
        # the next commonest: where the chain below leads these two, without its tests
        if type(typ) is Obj and value.__class__ is LocDict:
            return self.check_obj(value, typ, path, at, strict, key_at)
        if type(typ) is Seq and value.__class__ is LocList:
            return self.check_seq(value, typ, path, strict)
        if isinstance(typ, Opt):
            if value is None:
                return None
            return self.check(value, typ.inner, path, at, strict, key_at)
        if isinstance(typ, AnyValue):
            self.check_any(value, path, at)
            return value
        if isinstance(typ, Str):
            if isinstance(value, str):
                return value
            if isinstance(value, dict | list) or strict:
                self.error(f"invalid type: {describe(value)}, expected a string", _at(at), path)
                return value
            return self.as_text(value, _at(at))
        if isinstance(typ, Bool):
            if not isinstance(value, bool):
                self.error(f"invalid type: {describe(value)}, expected a boolean", _at(at), path)
            return value
        if isinstance(typ, Int):
            self.check_int(value, typ, path, at)
            return value
        if isinstance(typ, Enum):
            self.check_enum(value, typ, path, at)
            return value
        if value is None and not strict and self.empty_plain(value, self.raw(_at(at))):
            loc = _at(at)
            empty: Any = LocList(loc) if isinstance(typ, Seq) else LocDict(loc)
            return self.check(empty, typ, path, at, key_at=key_at)
        if isinstance(typ, Seq):
            if not isinstance(value, list):
                self.error(f"invalid type: {describe(value)}, expected a sequence", _at(at), path)
                return value
            return self.check_seq(value, typ, path, strict, _at(at))
        if not isinstance(value, dict):
            self.error(
                f"invalid type: {describe(value)}, expected {expected_name(typ)}", _at(at), path
            )
            return value
        if isinstance(typ, Map):
            in_plain: _Site | None = None if isinstance(value, LocDict) else (None, _at(at))
            for key in list(value):
                site = in_plain or (value, key)
                value[key] = self.check(value[key], typ.value, f"{path}.{key}", site, strict, site)
            return value
        if isinstance(typ, Untagged):
            anchor = _key_at(key_at) if key_at is not None else _at(at)
            return self.check_untagged(value, typ, path, anchor)
        return self.check_obj(value, typ, path, at, strict, key_at)

    def check_seq(
        self, value: list[Any], typ: Seq, path: str, strict: bool, at: Location | None = None
    ) -> list[Any]:
        """Each item of a sequence; ``at`` stands for the items' places in a plain list."""
        plain: _Site | None = None if isinstance(value, LocList) else (None, at)
        strings = _takes_any_string(typ.item)
        for i, item in enumerate(value):
            if strings and item.__class__ is str:
                continue  # as in check_obj
            site = plain or (value, i)
            value[i] = self.check(item, typ.item, f"{path}[{i}]", site, strict)
        return value

    def check_int(self, value: Any, typ: Int, path: str, at: _Site) -> None:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and typ.unsigned and not 0 <= value < 2**32:
            self.error(f"invalid value: {describe(value)}, expected u32", _at(at), path)
        elif ok and not typ.unsigned and not -(2**63) <= value < 2**63:
            self.error(f"invalid value: {describe(value)}, expected i64", _at(at), path)
        elif not ok:
            self.error(
                f"invalid type: {describe(value)}, expected {expected_name(typ)}", _at(at), path
            )

    def check_enum(self, value: Any, typ: Enum, path: str, at: _Site) -> None:
        text = value if isinstance(value, str) else None
        if text is None and not isinstance(value, dict | list):
            text = self.as_text(value, _at(at))
        if text is None:
            self.error(f"invalid type: {describe(value)}, expected a variant name", _at(at), path)
        elif text not in typ.values:
            self.error(
                f"unknown variant `{text}`, expected {backticked(typ.values)}", _at(at), path
            )

    def check_any(self, value: Any, path: str, at: _Site) -> None:
        """Free-form values are serde values, whose integers are 64-bit (i64 or u64).

        The YAML reader keeps integers up to 128 bits (as serde_yaml does);
        the reference then refuses the ones a free-form value cannot hold, so
        this checker does too (issue 13, item 12). Iterative: no recursion.
        """
        stack: list[tuple[Any, str, _Site]] = [(value, path, at)]
        while stack:
            item, where, site = stack.pop()
            plain: _Site | None
            if isinstance(item, dict):
                plain = None if isinstance(item, LocDict) else site
                for key, child in item.items():
                    stack.append((child, f"{where}.{key}", plain or (item, key)))
            elif isinstance(item, list):
                plain = None if isinstance(item, LocList) else site
                for i, child in enumerate(item):
                    stack.append((child, f"{where}[{i}]", plain or (item, i)))
            elif (
                isinstance(item, int)
                and not isinstance(item, bool)
                and not INT64_MIN <= item <= UINT64_MAX
            ):
                self.error(
                    f"invalid value: integer `{item}` is out of range; free-form values hold "
                    "64-bit integers",
                    _at(site),
                    where,
                )

    def check_obj(
        self,
        value: dict[str, Any],
        typ: Obj,
        path: str,
        at: _Site,
        strict: bool,
        key_at: _Site | None,
    ) -> Any:
        fields = typ.fields
        located = value if isinstance(value, LocDict) else None
        plain = None if located is not None else (None, _at(at))
        for key in list(value):
            if key not in fields:
                self.error(
                    f"unknown field `{key}`, expected {backticked(list(fields))}",
                    located.where(key) if located is not None else _at(at),
                    path or key,
                    code="unknown_field",
                )
                continue
            field = fields[key]
            if value[key].__class__ is str and _takes_any_string(field):
                continue  # what check() would return, unchanged, without building its arguments
            site = plain or (value, key)
            value[key] = self.check(
                value[key], field, f"{path}.{key}" if path else key, site, strict, site
            )
        if not typ.required <= value.keys():  # then each missing one, in the fields' order
            anchor = _key_at(key_at) if key_at is not None else _at(at)
            for key in fields:
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
        return self.check_obj(value, typ.variants[present[0]], path, (None, loc), True, None)


def _takes_any_string(typ: Type) -> bool:
    """Whether ``check`` returns every ``str`` unchanged for ``typ`` (``Str`` or ``Opt(Str)``).

    Most values are strings where strings belong; the walks skip the call
    (and the path and positions they would build for it) for those.
    """
    return typ.__class__ is Str or (typ.__class__ is Opt and typ.inner.__class__ is Str)


def check_structure(data: Any, text: str, file: str, depth: int | None = None) -> list[Diagnostic]:
    """Every structural error of a parsed spec (unknown keys, types, missing fields).

    ``depth`` is the nesting the parse found (:attr:`YamlDocument.depth`);
    within :data:`MAX_NESTING` the document is not walked again to find it.
    """
    checker = StructureChecker(text, file)
    root = data.pos if isinstance(data, LocDict) else Location(file, 1, 1)
    if not isinstance(data, dict):
        checker.error(
            f"invalid type: {describe(data)}, expected struct SkillSpec", root, "", "structure"
        )
        return checker.errors
    too_deep = (
        None if depth is not None and depth <= MAX_NESTING else _deeper_than(data, MAX_NESTING)
    )
    if too_deep is not None:
        checker.error(
            f"recursion limit exceeded: nesting deeper than {MAX_NESTING} levels",
            too_deep,
            "",
            "nesting",
        )
        return checker.errors
    checker.check(data, SPEC, "", (None, root))
    return checker.errors


#: The reference's YAML reader refuses documents nested deeper than this.
MAX_NESTING = 128


def _deeper_than(data: Any, limit: int) -> Location | None:
    """Where the first mapping or sequence nested deeper than ``limit`` starts, if any."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return node.pos if isinstance(node, LocDict | LocList) else None
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return None
