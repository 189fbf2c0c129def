"""PyYAML's C parser (libyaml) and event classes, imported without the rest of PyYAML.

Why: ``import yaml`` runs PyYAML's ``__init__``, which imports and binds its
loaders, dumpers, constructors (with ``datetime`` and ``base64``) and
resolvers (a dozen regexes): about 9 ms of every ``skillspec validate``,
which needs only ``yaml._yaml.CParser``, its parse events and the parse
errors. So when PyYAML is not imported yet, ``yaml`` is put in
``sys.modules`` as its real package whose ``__init__`` has not run
(:class:`_PartialYaml`): the modules the extension binds names from when it
loads (error, tokens, events, nodes, reader, scanner, parser, composer) are
imported into it for real, then the C extension. The extension also binds
four exception classes that only PyYAML's other halves raise
(constructor, emitter, serializer and representer errors); while it loads
those are stand-ins, and they are swapped for the real classes when the
package completes. It completes the first time anything asks it for a name
it lacks (``yaml.safe_load``, ``from yaml import Dumper``): its real
``__init__`` runs in it then, so the rest of the process sees all of PyYAML
exactly as ``import yaml`` gives it. When PyYAML is already imported, all of
this is skipped.

And one regex: importing ``yaml.reader`` compiles
``Reader.NON_PRINTABLE``, a character class over all of Unicode (58M
instructions, more than starting Python). Only PyYAML's pure-Python reader
uses it and libyaml reads the text itself, so while ``yaml.reader`` runs
that one pattern is given as a :class:`_LazyPattern`, compiled if anything
ever uses it. Every other ``re.compile`` call, then and later, is the real
one; if the pattern ever changes it simply compiles as before.
"""

from __future__ import annotations

import re
import sys
from importlib import import_module
from importlib.util import find_spec, module_from_spec
from types import ModuleType, SimpleNamespace

TYPE_CHECKING = False  # ``typing`` is not imported at run time: see engine.record
if TYPE_CHECKING:
    from typing import Any

#: The class attribute ``yaml.reader.Reader.NON_PRINTABLE`` compiles when PyYAML is imported.
_NON_PRINTABLE = "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
#: PyYAML's modules the parser raises from or builds with, imported for real.
PARSER_MODULES = ("error", "tokens", "events", "nodes", "reader", "scanner", "parser", "composer")
#: (module, class): what the C extension binds but only PyYAML's other halves raise.
STAND_INS = (
    ("constructor", "ConstructorError"),
    ("emitter", "EmitterError"),
    ("serializer", "SerializerError"),
    ("representer", "RepresenterError"),
)


class _LazyPattern:
    """A pattern compiled on first use (see the module docstring)."""

    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)


class _PartialYaml(ModuleType):
    """The ``yaml`` package before its ``__init__`` ran; the first name it lacks runs it."""

    def __getattr__(self, name: str) -> Any:
        complete(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'yaml' has no attribute {name!r}") from None


def complete(package: ModuleType) -> None:
    """Run PyYAML's ``__init__`` in the partial ``package``; give the extension the real four."""
    if type(package) is not _PartialYaml:
        return
    package.__class__ = ModuleType  # type: ignore[assignment]  # an ordinary module: no second run
    for module, _name in STAND_INS:
        package.__dict__.pop(module, None)
    assert package.__spec__ is not None and package.__spec__.loader is not None
    package.__spec__.loader.exec_module(package)
    extension = sys.modules.get("yaml._yaml")
    if extension is None:
        return
    for module, name in STAND_INS:
        real = sys.modules.get(f"yaml.{module}")
        if real is not None:
            setattr(extension, name, getattr(real, name))


def _import_parser_modules() -> None:
    real = re.compile

    def compile_lazily(pattern: Any, flags: int = 0) -> Any:
        if pattern == _NON_PRINTABLE:
            return _LazyPattern(pattern, flags)
        return real(pattern, flags)

    re.compile = compile_lazily
    try:
        for name in PARSER_MODULES:
            import_module(f"yaml.{name}")
    finally:
        re.compile = real


def _install() -> None:
    """``yaml`` as a :class:`_PartialYaml` holding the parser's modules and the C extension."""
    spec = find_spec("yaml")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # pragma: no cover - no PyYAML package: ``import yaml`` says so below
    package = module_from_spec(spec)
    package.__class__ = _PartialYaml
    sys.modules["yaml"] = package
    try:
        _import_parser_modules()
        error = sys.modules["yaml.error"]
        for module, name in STAND_INS:
            stand_in = type(name, (error.YAMLError,), {"__module__": f"yaml.{module}"})
            setattr(package, module, SimpleNamespace(**{name: stand_in}))
        import_module("yaml._yaml")
    except ImportError:  # pragma: no cover - a PyYAML without libyaml: use all of it
        complete(package)
    finally:
        for module, _name in STAND_INS:
            if isinstance(package.__dict__.get(module), SimpleNamespace):
                delattr(package, module)


if "yaml" not in sys.modules:
    _install()

from yaml.error import MarkedYAMLError, YAMLError  # noqa: E402
from yaml.events import (  # noqa: E402
    AliasEvent,
    DocumentEndEvent,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

try:  # libyaml is in every PyYAML wheel we install; fall back for odd builds.
    from yaml._yaml import CParser as Parser
except ImportError:  # pragma: no cover
    import yaml

    Parser = yaml.SafeLoader  # type: ignore[misc,assignment]

__all__ = [
    "AliasEvent",
    "DocumentEndEvent",
    "MappingEndEvent",
    "MarkedYAMLError",
    "Parser",
    "ScalarEvent",
    "SequenceEndEvent",
    "SequenceStartEvent",
    "StreamEndEvent",
    "YAMLError",
]
