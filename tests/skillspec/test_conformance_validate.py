"""Validate verdicts agree with the reference on every spec of the conformance corpus.

``validate`` in EXPECTED.json is the reference's full check (files included),
``validate_unresolved`` its parse + structure + cross-reference check. We
compare our ``ok`` with both, spec by spec, and check that the first error the
reference reports is among ours (same field and value) where it names one.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from engine.skillspec.load import check_spec
from tests.conftest import REFERENCE

EXPECTED = REFERENCE / "EXPECTED.json"

pytestmark = pytest.mark.skipif(
    not EXPECTED.is_file(),
    reason=f"reference conformance corpus not found at {REFERENCE} (EXPECTED.json missing)",
)


def _specs() -> dict[str, Any]:
    if not EXPECTED.is_file():
        return {}
    specs: dict[str, Any] = json.loads(EXPECTED.read_text())["specs"]
    return specs


SPECS = _specs()


def test_corpus_has_the_25_specs() -> None:
    data = json.loads(EXPECTED.read_text())
    assert data["spec_count"] == 25
    assert len(SPECS) == 25


@pytest.mark.parametrize("rel", sorted(SPECS))
def test_full_validate_verdict(rel: str) -> None:
    expected = SPECS[rel]["validate"]
    report = check_spec(REFERENCE / rel)
    assert report.ok is expected["ok"], [str(d) for d in report.errors]


@pytest.mark.parametrize("rel", sorted(SPECS))
def test_unresolved_validate_verdict(rel: str) -> None:
    expected = SPECS[rel]["validate_unresolved"]
    report = check_spec(REFERENCE / rel, resolve_files=False)
    assert report.ok is expected["ok"], [str(d) for d in report.errors]
    assert report.structural_ok is expected["ok"]


def _reference_fields(error: str) -> list[str]:
    """The ``<field>: `` prefixes of a reference failure list (files) or its value."""
    return re.findall(r"(?:^|; |failed: )([a-z_]+(?:\.[A-Za-z0-9_.\-]+)?): ", error)


@pytest.mark.parametrize("rel", sorted(r for r in SPECS if not SPECS[r]["validate"]["ok"]))
def test_reference_first_error_is_among_ours(rel: str) -> None:
    error: str = SPECS[rel]["validate"]["error"]
    report = check_spec(REFERENCE / rel)
    ours = [f"{d.path}: {d.message}" for d in report.errors]
    text = "\n".join(ours)
    if "unknown field" in error:
        field = re.search(r"unknown field `([^`]+)`", error)
        assert field and f"unknown field `{field.group(1)}`" in text
    elif error.startswith("unknown reference"):
        assert error in text
    else:
        for field in _reference_fields(error):
            key = field.split(".")[-1] if field.startswith("imports") else field
            assert any(key in line for line in ours), (field, ours)


def test_agreement_count(capsys: pytest.CaptureFixture[str]) -> None:
    agree = 0
    for rel, expected in SPECS.items():
        full = check_spec(REFERENCE / rel).ok == expected["validate"]["ok"]
        bare = (
            check_spec(REFERENCE / rel, resolve_files=False).ok
            == expected["validate_unresolved"]["ok"]
        )
        agree += full and bare
    with capsys.disabled():
        print(f"\nconformance: validate verdicts agree on {agree}/{len(SPECS)} specs")
    assert agree == len(SPECS) == 25
