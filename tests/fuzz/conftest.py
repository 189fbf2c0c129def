"""Hypothesis profiles for the fuzz surfaces (issues 13 and 22).

``fuzz-fast`` (the default) keeps the whole fuzz set to well under a minute
so it runs in every suite; ``slow`` runs at least 10,000 examples per surface
(rows, rule YAML, spec YAML, decide inputs, refused paths, hook payloads,
serve) in its in-process test, and 1,000 in each test that goes through a
store or a whole CLI run; and :func:`depth_sweep` then tries every depth:

    HYPOTHESIS_PROFILE=slow python -m pytest tests/fuzz -m slow --hypothesis-show-statistics

Under the slow profile every fuzz test carries the ``slow`` marker, so
``-m slow`` selects exactly these surfaces and ``-m "not slow"`` skips them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "fuzz-fast")
#: Examples per surface under the slow profile (issue 13 asks for at least 10,000).
SLOW_EXAMPLES = 10_000
#: Examples for the tests that commit to a store or run a whole CLI, per test.
SLOW_STORE_EXAMPLES = 1_000
_COMMON = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
    "derandomize": False,
}
settings.register_profile("fuzz-fast", max_examples=40, **_COMMON)
settings.register_profile("slow", max_examples=SLOW_EXAMPLES, **_COMMON)


def fuzz_settings(*, through_store: bool = False) -> settings:
    """The active fuzz profile's settings for one test.

    Under ``slow`` every surface's in-process test runs :data:`SLOW_EXAMPLES`
    examples; tests that also go through a store or a whole CLI run (a
    transaction each) run :data:`SLOW_STORE_EXAMPLES`, so the slow run stays
    within half an hour on a shared two-core machine.
    """
    if PROFILE != "slow":
        return settings.get_profile("fuzz-fast")
    examples = SLOW_STORE_EXAMPLES if through_store else SLOW_EXAMPLES
    return settings(settings.get_profile("slow"), max_examples=examples)


def depth_sweep(top: int, *, band: int = 150, stride: int = 10) -> list[int]:
    """The nesting depths a sweep tries, from 1 to ``top`` (issue 22).

    Under ``slow``, every one. Otherwise every depth of the ``band`` just under
    ``top`` (where a value still parses but re-reading it from a few frames
    deeper can overflow: the only place the one-depth-wide failing window can
    be) and every ``stride``-th below it, so the default profile stays fast.
    """
    if PROFILE == "slow":
        return list(range(1, top + 1))
    edge = max(1, top - band)
    return [*range(1, edge, stride), *range(edge, top + 1)]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if PROFILE != "slow":
        return
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.slow)


def scratch_dir(prefix: str) -> Path:
    """A temporary folder for one fuzz module, removed when the test process exits.

    The fuzz modules build their fixture files at import (Hypothesis reruns a test body
    thousands of times, so per-example tmp_path folders would dominate), and a bare
    mkdtemp left four folders in /tmp for every suite run.
    """
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
