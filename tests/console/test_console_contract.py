"""The console's house rules (issue 20 item 2), each checked so it cannot quietly lapse.

- it reaches the engine only through ``engine.views`` and the foundations (an
  import-linter contract in pyproject.toml; a console import past the views on a
  copy of the tree breaks it);
- each pane's class docstring lists its keys and messages, every message class
  says why it exists, and help is built from the bindings (so it lists them all);
- the level style maps take the level words from the rule vocabulary.
"""

from __future__ import annotations

import ast
import inspect
import pkgutil
import shutil
import tomllib
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.message import Message

import console
import engine
from console.app import PANES
from engine.vocab import LEVELS
from tests.conftest import ROOT
from tests.test_layering import _lint_imports

CONTRACT = "console imports only engine.views and the foundations"
#: Key names as a docstring writes them.
SHOWN = {
    "slash": "/",
    "question_mark": "?",
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "escape": "esc",
}


def _contracts() -> list[dict[str, object]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(data["tool"]["importlinter"]["contracts"])


def test_the_contract_forbids_every_engine_package_but_views_and_the_foundations() -> None:
    contracts = _contracts()
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    assert isinstance(layers, list)
    foundations = {name.strip() for name in str(layers[-1]).split(":")}
    contract = next(c for c in contracts if c["name"] == CONTRACT)
    assert contract["source_modules"] == ["console"]
    assert contract["allow_indirect_imports"] is True
    top = {f"engine.{m.name}" for m in pkgutil.iter_modules(engine.__path__)}
    assert set(contract["forbidden_modules"]) == top - foundations - {"engine.views"}  # type: ignore[arg-type]


def test_a_console_import_past_the_views_breaks_the_contract(tmp_path: Path) -> None:
    copy = tmp_path / "tree"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    for package in ("engine", "console"):
        shutil.copytree(
            ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    clean = _lint_imports(copy)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert f"{CONTRACT} KEPT" in clean.stdout
    with (copy / "console" / "panes" / "holds.py").open("a", encoding="utf-8") as f:
        f.write("\nfrom engine.rules.authority import holds as _holds  # past the views\n")
    broken = _lint_imports(copy)
    assert broken.returncode != 0
    assert f"{CONTRACT} BROKEN" in broken.stdout
    assert "console.panes.holds -> engine.rules.authority.holds" in broken.stdout


def _console_classes() -> list[type]:
    found: list[type] = []
    for info in pkgutil.walk_packages(console.__path__, "console."):
        module = __import__(info.name, fromlist=["_"])
        for _name, obj in inspect.getmembers(module, inspect.isclass):
            if obj.__module__ != info.name:
                continue
            found.append(obj)
            found.extend(v for v in vars(obj).values() if inspect.isclass(v))
    return found


def test_every_console_class_and_message_says_why_it_exists() -> None:
    missing = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _console_classes()
        if not (cls.__dict__.get("__doc__") or "").strip()
    ]
    assert missing == []
    messages = [c for c in _console_classes() if issubclass(c, Message)]
    assert len(messages) >= 20  # the panes' own and the app's


def _written(key: str) -> set[str]:
    return {key, SHOWN.get(key, key)}


@pytest.mark.parametrize("spec", PANES, ids=[p.id for p in PANES])
def test_each_pane_docstring_lists_its_keys_and_messages(spec: object) -> None:
    cls = spec.cls  # type: ignore[attr-defined]
    doc = cls.__doc__ or ""
    assert "Keys:" in doc and "Messages:" in doc, cls.__name__
    for binding in cls.BINDINGS:
        assert isinstance(binding, Binding)
        for key in binding.key.split(","):
            assert any(f"``{w}``" in doc for w in _written(key.strip())), (cls.__name__, key)
    for name, value in vars(cls).items():
        if inspect.isclass(value) and issubclass(value, Message):
            assert f":class:`{name}`" in doc, (cls.__name__, name)


def test_the_level_styles_take_their_words_from_the_vocabulary() -> None:
    from console.panes.fires import LEVEL_STYLE
    from console.panes.timeline import GLYPHS

    assert tuple(LEVEL_STYLE) == LEVELS and tuple(GLYPHS) == LEVELS
    restated = []
    for path in (ROOT / "console").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if keys & set(LEVELS):
                    restated.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert restated == []
