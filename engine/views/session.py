"""What the console is opened on: store, spec globs, policy directory, config.

Resolved before the screen opens so that a bad flag or a malformed
``harness.toml`` is a plain CLI error (exit 2), not a crash inside the UI.
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from engine.config import HarnessConfig, config_path, load_config, resolve_store
from engine.errors import Diagnostic, InputError, Location

ROOT = Path(__file__).resolve().parents[2]
STARTER_RULES = ROOT / "starter_rules"


@dataclass(frozen=True, slots=True)
class ConsoleOptions:
    """Everything the console needs to start; ``demo`` means the store is a temp file.

    ``act`` says the console may act (take the store lease, store fires,
    create holds and stops, run actions) when nobody else does; without it the
    console only watches. ``--demo`` implies it. ``config`` is what the
    console works with (with ``--demo``: plus the demo's in-memory enforce
    entry); ``file_config`` is what the operator's harness.toml alone grants,
    for anything the operator might paste back into that file.
    """

    store_path: Path
    demo: bool = False
    act: bool = False
    spec_globs: tuple[str, ...] = ()
    policy_dir: Path | None = None
    config_file: Path = field(default_factory=config_path)
    config: HarnessConfig = field(default_factory=HarnessConfig)
    starter_dir: Path = STARTER_RULES
    #: ``--demo`` without ``--store``: the temporary directory to remove on exit.
    temp_dir: Path | None = None
    #: The configuration as the file says it (None: the same as ``config``).
    file_config: HarnessConfig | None = None

    @property
    def granted(self) -> HarnessConfig:
        """What harness.toml itself grants (no demo additions)."""
        return self.file_config if self.file_config is not None else self.config

    @classmethod
    def from_args(
        cls,
        *,
        store: str | None,
        demo: bool = False,
        specs: tuple[str, ...] = (),
        policy: str | None = None,
        act: bool = False,
    ) -> ConsoleOptions:
        cfg = file_cfg = load_config()
        temp_dir: Path | None = None
        if demo and store is None:
            temp_dir = Path(tempfile.mkdtemp(prefix="harness-demo-"))
            store_path = temp_dir / "journal.db"
        else:
            store_path = resolve_store(store, cfg)
            if demo and store_path.exists() and store_path.stat().st_size > 0:
                msg = "--demo writes a simulated fleet: give it a new store path (or none)"
                raise InputError(
                    f"{store_path}: {msg}",
                    title="Store not empty",
                    diagnostics=[Diagnostic(msg, Location(str(store_path)), path="--store")],
                )
        policy_dir: Path | None = None
        if policy:
            policy_dir = Path(policy).expanduser()
            if not policy_dir.is_dir():
                raise InputError(
                    f"{policy_dir}: --policy must be a directory",
                    diagnostics=[
                        Diagnostic("not a directory", Location(str(policy_dir)), path="--policy")
                    ],
                )
        elif demo:
            from engine.views.demo import write_demo_policy

            policy_dir = write_demo_policy(store_path.parent / "policy")
        demo_specs: tuple[str, ...] = ()
        if demo:
            from engine.views.demo import demo_config, write_demo_spec

            cfg = demo_config(cfg)
            demo_specs = (str(write_demo_spec(store_path.parent / "specs")),)
        return cls(
            store_path=store_path,
            demo=demo,
            act=act or demo,
            spec_globs=tuple(specs) + tuple(cfg.console_specs) + demo_specs,
            temp_dir=temp_dir,
            policy_dir=policy_dir,
            config_file=config_path(),
            config=cfg,
            file_config=file_cfg,
        )

    def spec_files(self) -> list[Path]:
        """The spec globs expanded (``~`` and ``**`` allowed), deduplicated, sorted."""
        return expand_globs(self.spec_globs)

    def watch_dirs(self) -> list[Path]:
        """Parent directories to watch: editors save by rename, so files alone are not enough.

        Not ``harness.toml``'s: the console polls that file (see
        :func:`engine.config.config_signature`), as its directory often holds the store.
        """
        dirs: set[Path] = set()
        for pattern in self.spec_globs:
            dirs.add(_glob_root(pattern))
        if self.policy_dir is not None:
            dirs.add(self.policy_dir)
        dirs.update(self.config.policy_rule_dirs())
        dirs.add(self.starter_dir)
        return sorted(d for d in dirs if d.is_dir())


def open_store(path: Path) -> sqlite3.Connection:
    """A connection to the store at ``path`` for one worker thread, migrated to the full schema.

    The console's one way in to the store (its panes read through the views
    here; it never opens the store module itself).
    """
    from engine.store.db import connect
    from engine.views.store_schema import register_full_schema

    register_full_schema()
    return connect(path, check_same_thread=False)


@contextlib.contextmanager
def store_session(path: Path) -> Iterator[sqlite3.Connection]:
    """:func:`open_store` for one worker's work, closed after it.

    A store error met on the way (an I/O error, a corrupt page, a lock held
    past the busy timeout) leaves as the InputError naming the store, which a
    console worker shows; a raw ``sqlite3`` error would end the console.
    """
    from engine.store.db import store_fault

    conn = open_store(path)
    try:
        yield conn
    except sqlite3.DatabaseError as exc:
        raise store_fault(exc, path) from None
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.close()


def classify_change(options: ConsoleOptions, path: Path) -> set[str]:
    """What a changed file affects: ``spec``, ``rules`` and/or ``config``.

    Matching is by location, not by event type, because editors save by
    writing a temp file and renaming it over the original.
    """
    kinds: set[str] = set()
    resolved = path.resolve() if path.exists() else path.absolute()
    if resolved == options.config_file.absolute() or path == options.config_file:
        kinds.add("config")
    rule_dirs = [options.starter_dir, *options.config.policy_rule_dirs()]
    if options.policy_dir is not None:
        rule_dirs.append(options.policy_dir)
    if path.suffix in (".yml", ".yaml"):
        for d in rule_dirs:
            if resolved.parent == d.resolve():
                kinds.add("rules")
        for pattern in options.spec_globs:
            expanded = Path(os.path.expanduser(pattern))
            if (
                resolved == expanded.absolute()
                or resolved.match(str(expanded))
                or (fnmatch.fnmatch(str(resolved), str(expanded)))
            ):
                kinds.add("spec")
    return kinds


def expand_globs(patterns: tuple[str, ...] | list[str]) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        expanded = os.path.expanduser(pattern)
        matches = glob.glob(expanded, recursive=True)
        if not matches and Path(expanded).is_file():
            matches = [expanded]
        found.update(Path(m).resolve() for m in matches if Path(m).is_file())
    return sorted(found)


def _glob_root(pattern: str) -> Path:
    """The deepest directory of ``pattern`` that holds no glob characters."""
    parts = Path(os.path.expanduser(pattern)).parts
    fixed: list[str] = []
    for part in parts:
        if any(ch in part for ch in "*?["):
            break
        fixed.append(part)
    root = Path(*fixed) if fixed else Path(".")
    return root.parent if root.is_file() or root == Path(os.path.expanduser(pattern)) else root
