"""Immutable value classes for the modules every fast command imports, without ``dataclasses``.

Why not frozen dataclasses there: importing ``dataclasses`` loads
``inspect`` (about 42M instructions, ~15 ms of a cold start) and every frozen
dataclass generates six methods through ``exec`` (~1 ms each class). The
command hook runs once per agent tool call and ``skillspec validate`` from
pre-commit hooks; the errors, positions and spec reports they import are
built on :class:`Record` instead.

A record lists its fields in ``__match_args__`` (in constructor order, as a
dataclass would) and in ``__slots__``, assigns each once in ``__init__`` as
``Final`` (so mypy refuses any later assignment, as it does for a frozen
dataclass) and gets from this base the equality, hash and repr a frozen
dataclass generates: equal only to the same class with equal fields, hashed
by its fields (unhashable when a field is), printed ``Name(field=value, ...)``.

The same paths do not import ``typing`` at run time either (~3 ms): their
modules say ``TYPE_CHECKING = False`` and import annotation-only names under
``if TYPE_CHECKING:``, which mypy reads as true whatever the name is bound to.
"""

from __future__ import annotations

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Self


class Record:
    """Base of an immutable value class; see the module docstring for the contract."""

    __slots__ = ()
    __match_args__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__qualname__}({fields})"

    def replace(self, **changes: object) -> Self:
        """A copy with ``changes`` applied, as ``dataclasses.replace`` makes one.

        An unknown field name is a TypeError, so a misspelt change never passes silently.
        """
        unknown = changes.keys() - set(self.__match_args__)
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field {sorted(unknown)[0]!r}")
        values = {name: changes.get(name, getattr(self, name)) for name in self.__match_args__}
        return type(self)(**values)
