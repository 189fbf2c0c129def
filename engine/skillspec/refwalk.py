"""Walking a parsed spec for its references: reporting findings, reading values with positions.

Why apart from :mod:`engine.skillspec.validate`: that module says *which*
references a spec must resolve (the reference's rules, section by section);
this one says *how* a checker reads a value, its location and its dotted path,
and reports a finding in the reference's words. The locations and paths are
made only for a finding, as most references are known.
"""

from __future__ import annotations

from engine.errors import Diagnostic, Location
from engine.yamlsrc import LocDict, LocList

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


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


def seq_of(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def obj_of(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def string_of(obj: Any, key: str) -> list[str]:
    """``obj[key]`` if it is a string (what :meth:`RefWalk.one` yields), as a list."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return [value] if isinstance(value, str) else []


def strings_of(obj: Any, key: str) -> list[str]:
    """The string items of the list ``obj[key]`` (what :meth:`RefWalk.many` yields)."""
    items = obj.get(key) if isinstance(obj, dict) else None
    return [item for item in items if isinstance(item, str)] if isinstance(items, list) else []


class RefWalk:
    """Findings about one parsed spec, and the reads that locate them (see the module docstring)."""

    def __init__(self, data: dict[str, Any], file: str) -> None:
        self.data = data
        self.file = file
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.root = data.pos if isinstance(data, LocDict) else Location(file, 1, 1)

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
