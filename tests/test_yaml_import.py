"""PyYAML is imported without compiling the one regex we never use, and nothing else changes.

See ``engine.yamlsrc._import_yaml``: ``yaml.reader.Reader.NON_PRINTABLE`` is
compiled on first use instead of at import (58M instructions of every
``skillspec validate``); the pure-Python reader that uses it still refuses
what it refused, and ``re.compile`` is the real one again afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys

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
