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
#: circular value would raise RecursionError instead of ValueError).
_c_make = getattr(json.encoder, "c_make_encoder", None)
_C_CANONICAL = (
    None
    if _c_make is None
    else _c_make(None, _CANONICAL.default, _encode_str, None, ":", ",", True, False, True)
)


def canonical_json(value: object) -> str:
    """The canonical JSON text of ``value``: sorted keys, no whitespace, UTF-8 kept."""
    if type(value) is str:
        return _encode_str(value)
    if _C_CANONICAL is None:
        return _CANONICAL.encode(value)
    return "".join(_C_CANONICAL(value, 0))


def digest(value: object) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    import hashlib  # here: OpenSSL's start-up is wasted on a hook call that digests nothing

    data = canonical_json(value).encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest()


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
