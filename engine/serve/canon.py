"""Turning agent text into what the journal may hold: digests, identifiers and paths.

The journal never stores agent text (DESIGN.md "Journal"). Everything an
agent sends that is not an identifier, an enum or a path is reduced here to a
``sha256:`` digest of its canonical JSON (sorted keys, no whitespace), so the
same tool call hashes the same whether it arrives as a Claude Code hook
payload or as an OTLP attribute, and a value that does not fit a journal
shape is dropped (and counted by the caller), never stored.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator

from engine.journal.rows import IDENT_RE, MAX_PATH

_ident_match = IDENT_RE.fullmatch
#: Volatile parts of an error line (hex ids, numbers) that would make the same
#: failure hash differently each time it happens.
_VOLATILE = re.compile(r"0x[0-9a-fA-F]+|[0-9a-fA-F]{8,}|\d+")
_SPACE = re.compile(r"\s+")


#: One encoder for every digest: ``json.dumps`` with these options builds a new
#: encoder per call, which cost more than the encoding of a typical tool input.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_encode_str = json.encoder.encode_basestring
#: The C encoder ``_CANONICAL.encode`` would build on every call, built once.
#: ``JSONEncoder.encode`` makes a fresh one (and a float formatter closure) per
#: value, which was half the cost of digesting a small tool input, and serve
#: digests one per record. It keeps no circular-reference markers (they would
#: be shared state between calls and threads): every value digested here comes
#: from ``json.loads`` or an OTLP AnyValue, neither of which can be circular (a
#: circular value would exhaust the stack, and then :func:`_canonical_iterative`
#: refuses it with a ValueError).
_c_make = getattr(json.encoder, "c_make_encoder", None)
_C_CANONICAL = (
    None
    if _c_make is None
    else _c_make(None, _CANONICAL.default, _encode_str, None, ":", ",", True, False, True)
)


def canonical_json(value: object) -> str:
    """The canonical JSON text of ``value``: sorted keys, no whitespace, UTF-8 kept.

    The encoder recurses once per nesting level, so a value that ``json.loads``
    accepted just under the recursion limit (a tool input nested ~975 deep)
    could not be re-encoded from a deeper stack: such a value is encoded again
    by :func:`_canonical_iterative`, which gives the same text at any depth.
    """
    if type(value) is str:
        return _encode_str(value)
    try:
        if _C_CANONICAL is None:
            return _CANONICAL.encode(value)
        return "".join(_C_CANONICAL(value, 0))
    except RecursionError:
        return _canonical_iterative(value)


_INF = float("inf")


def _float_text(value: float) -> str:
    """A float as the encoder writes it (``allow_nan``: NaN and Infinity as bare words)."""
    if value != value:
        return "NaN"
    if value in (_INF, -_INF):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _after_first(heads: list[str]) -> Iterator[str]:
    """Each entry's lead-in: its key (if any), after a ``,`` for all but the first."""
    for i, head in enumerate(heads):
        yield "," + head if i else head


def _key_text(key: object) -> str:
    """A mapping key as the encoder writes it (before quoting), or its TypeError."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float_text(key)
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _scalar_text(value: object) -> str | None:
    """The text of a non-container value, None for a list, tuple or dict."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _encode_str(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, list | tuple | dict):
        return None
    return _scalar_text(_CANONICAL.default(value))  # raises TypeError, as the encoder does


def _canonical_iterative(value: object) -> str:
    """:func:`canonical_json`'s text built with an explicit stack (no recursion at all).

    Mirrors the C encoder's choices: keys sorted as ``sorted(d.items())``
    sorts them, ``,`` and ``:`` separators, non-ASCII kept, NaN and Infinity
    as bare words. A container met again inside itself is a ValueError (the
    C encoder, keeping no markers, would recurse until RecursionError).
    """
    out: list[str] = []
    #: Open containers: (iterator of (separator and key text, item), closing bracket, id).
    stack: list[tuple[Iterator[tuple[str, object]], str, int]] = []
    open_ids: set[int] = set()
    pending: object = value
    while True:
        text = _scalar_text(pending)
        if text is not None:
            out.append(text)
        else:
            ident = id(pending)
            if ident in open_ids:
                raise ValueError("Circular reference detected")
            if isinstance(pending, dict):
                items = sorted(pending.items())
                heads = [_encode_str(_key_text(k)) + ":" for k, _ in items]
                out.append("{")
                values = [v for _, v in items]
                stack.append((zip(_after_first(heads), values, strict=True), "}", ident))
            elif isinstance(pending, list | tuple):
                out.append("[")
                seps = _after_first([""] * len(pending))
                stack.append((zip(seps, pending, strict=True), "]", ident))
            open_ids.add(ident)
        while stack:
            entries_left, closer, ident = stack[-1]
            step = next(entries_left, None)
            if step is not None:
                out.append(step[0])
                pending = step[1]
                break
            out.append(closer)
            stack.pop()
            open_ids.discard(ident)
        else:
            return "".join(out)


TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from hashlib import _Hash

_sha256: Callable[[bytes], _Hash] | None = None


def digest(value: object) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    global _sha256
    if _sha256 is None:  # imported on first use: a hook call that digests nothing skips OpenSSL
        import hashlib

        _sha256 = hashlib.sha256
    data = canonical_json(value).encode("utf-8", "surrogatepass")
    return "sha256:" + _sha256(data).hexdigest()


def digest_json_text(text: str) -> str:
    """Digest of a JSON document given as text (OTLP exports arguments that way).

    The text is parsed and re-serialised canonically, so an exporter's key
    order or spacing does not change the digest; text that is not JSON is
    hashed as a JSON string.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = text
    return digest(value)


def redact_line(text: str) -> str:
    """The last non-empty line of ``text`` with numbers and hex ids masked.

    Why: cause digests group failures ("the same error again"), so volatile
    parts such as pids, ports, line numbers and request ids must not count.
    """
    last = ""
    for line in text.splitlines():
        if line.strip():
            last = line
    return _SPACE.sub(" ", _VOLATILE.sub("#", last)).strip()


def cause_digest(error: object) -> str | None:
    """Digest of the redacted last non-empty line of an error (None when there is none)."""
    if error is None:
        return None
    text = error if isinstance(error, str) else canonical_json(error)
    line = redact_line(text)
    return digest(line) if line else None


_IDENTS: dict[str, bool] = {}
_IDENTS_MAX = 100_000


def ident(value: object) -> str | None:
    """``value`` when it is a journal identifier, else None (answers cached: fleets repeat ids)."""
    if type(value) is not str:
        return None
    known = _IDENTS.get(value)
    if known is None:
        known = _ident_match(value) is not None
        if len(_IDENTS) >= _IDENTS_MAX:
            _IDENTS.clear()
        _IDENTS[value] = known
    return value if known else None


def journal_path(value: object, cwd: object = None) -> str | None:
    """A path fit for the journal: absolute and normalized, so sources and agents agree.

    A relative path is joined to ``cwd`` (when that is absolute) and ``..``
    and ``.`` are resolved lexically (nothing is looked up on disk: serve may
    run on another host). A relative path with no ``cwd`` to join stays
    relative, normalized. Returns None for anything that is not a printable
    path of at most ``MAX_PATH`` characters (such a value is dropped, never
    stored).
    """
    if not isinstance(value, str) or not value:
        return None
    path = value
    if not path.startswith("/") and isinstance(cwd, str) and cwd.startswith("/"):
        path = cwd + "/" + path
    path = os.path.normpath(path)
    if len(path) > MAX_PATH or not path.isprintable():
        return None
    return path


def project_of(cwd: object) -> str | None:
    """The basename of the git top-level containing ``cwd`` (None if none or not an id).

    Walks up looking for ``.git`` (a directory, or a file in worktrees) rather
    than running git, because this runs once per tool call.
    """
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        return None
    current = os.path.normpath(cwd)
    for _ in range(64):
        if os.path.exists(os.path.join(current, ".git")):
            return ident(os.path.basename(current))
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return None
