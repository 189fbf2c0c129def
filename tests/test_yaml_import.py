"""PyYAML's parser is imported without the rest of PyYAML or its costly regex; nothing else changes.

See ``engine.libyaml``: ``yaml.reader.Reader.NON_PRINTABLE`` is compiled on
first use instead of at import (58M instructions of every ``skillspec
validate``); the pure-Python reader that uses it still refuses what it
refused, and ``re.compile`` is the real one again afterwards. Only the
parser's modules load until something asks ``yaml`` for more; then all of
PyYAML is there, and the C extension raises PyYAML's own exception classes.
"""

from __future__ import annotations

import json
import subprocess
import sys

from engine import libyaml
from tests.conftest import ROOT

SCRIPT = """
import json, re, sys
real = re.compile
import engine.yamlsrc
import yaml, yaml.reader
out = {"lazy": type(yaml.reader.Reader.NON_PRINTABLE).__name__, "restored": re.compile is real}
try:
    yaml.reader.Reader("ok\\x07")
    out["refused"] = False
except yaml.reader.ReaderError:
    out["refused"] = True
out["compiled"] = type(yaml.reader.Reader.NON_PRINTABLE._compiled).__name__
out["load"] = yaml.safe_load("a: [1, yes]")
print(json.dumps(out))
"""


def test_the_lazy_pattern_still_guards_the_pure_reader() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, check=True
    )
    out = json.loads(done.stdout)
    assert out == {
        "lazy": "_LazyPattern",
        "restored": True,
        "refused": True,
        "compiled": "Pattern",
        "load": {"a": [1, True]},
    }


PARTIAL = """
import io, json, sys
import engine.yamlsrc
out = {
    "partial": type(sys.modules["yaml"]).__name__,
    "loaded": sorted(m for m in sys.modules if m.startswith("yaml")),
    "heavy": sorted({"datetime", "base64", "typing"} & set(sys.modules)),
    "parsed": engine.yamlsrc.parse_yaml("a: [1, yes]").data,
}
import yaml
out["load"] = yaml.safe_load("a: [1, yes]\\nb: 2001-12-14")["a"]
out["complete"] = type(sys.modules["yaml"]).__name__
ext = sys.modules["yaml._yaml"]
out["real"] = [
    getattr(ext, name) is getattr(sys.modules["yaml." + module], name)
    for module, name in engine.libyaml.STAND_INS
]
dumper = yaml.CDumper(io.StringIO())
dumper.open()
dumper.close()
try:
    dumper.serialize(yaml.ScalarNode("tag:yaml.org,2002:str", "x"))
except yaml.serializer.SerializerError as exc:
    out["raised"] = type(exc).__module__
out["dump"] = yaml.dump({"a": [1]}, Dumper=yaml.CSafeDumper)
print(json.dumps(out))
"""


def test_only_the_parser_loads_until_something_asks_for_more_of_pyyaml() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PARTIAL], capture_output=True, text=True, cwd=ROOT, check=True
    )
    out = json.loads(done.stdout)
    assert out["partial"] == "_PartialYaml"
    assert out["loaded"] == sorted(
        ["yaml", "yaml._yaml", *(f"yaml.{name}" for name in libyaml.PARSER_MODULES)]
    )
    assert "datetime" not in out["heavy"] and "base64" not in out["heavy"]
    assert out["parsed"] == {"a": [1, "yes"]}
    assert out["load"] == [1, True]
    assert out["complete"] == "module"
    assert out["real"] == [True] * len(libyaml.STAND_INS)
    assert out["raised"] == "yaml.serializer"
    assert out["dump"] == "a:\n- 1\n"
