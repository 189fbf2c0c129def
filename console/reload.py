"""File watching: spec globs, rule directories and harness.toml reload on change.

harness.toml alone is polled (twice a second, one ``stat``): its directory
often holds the store, and a watch there would wake on every write to it.

watchfiles watches the parent directories, recursively so that a spec glob
like ``~/skills/**/skill.spec.yml`` sees new and nested files (editors save by
writing a temp file and renaming it over the original, which a watch on the
file itself misses). Each batch of changes is classified by ``engine.views.session.
classify_change`` and posted to the app as one :class:`FilesChanged` message;
the panes reload in their own workers and keep their last good version when a
file is broken.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from textual.message import Message
from watchfiles import awatch

from engine.config import config_signature
from engine.views.session import ConsoleOptions, classify_change

#: How often the watcher's thread wakes to check for changes and for the stop
#: event: at watchfiles' default of 50 ms it woke 20 times a second in an idle
#: console; a saved file still reloads within about half a second.
STEP_MS = 250


@dataclass
class FilesChanged(Message):
    """Files the console depends on changed; ``kinds`` ⊆ {spec, rules, config}."""

    kinds: set[str] = field(default_factory=set)
    paths: list[Path] = field(default_factory=list)


class PostTarget(Protocol):
    """Anything with ``post_message`` (the app)."""

    def post_message(self, message: Message) -> bool: ...


async def watch_files(
    options: ConsoleOptions,
    post: PostTarget,
    stop: asyncio.Event,
    *,
    force_polling: bool | None = None,
    debounce_ms: int = 150,
    step_ms: int = STEP_MS,
) -> None:
    """Post a :class:`FilesChanged` for every relevant batch of changes until ``stop``."""
    poll = asyncio.create_task(_poll_config(options.config_file, post, stop, step_ms / 1000))
    try:
        await _watch_dirs(options, post, stop, force_polling, debounce_ms, step_ms)
        await stop.wait()
    finally:
        poll.cancel()


async def _poll_config(path: Path, post: PostTarget, stop: asyncio.Event, every_s: float) -> None:
    """``harness.toml``, polled: a watch on its directory would wake on every store write."""
    seen = config_signature(path)
    while not stop.is_set():
        await asyncio.sleep(every_s)
        now = config_signature(path)
        if now != seen:
            seen = now
            post.post_message(FilesChanged({"config"}, [path]))


async def _watch_dirs(
    options: ConsoleOptions,
    post: PostTarget,
    stop: asyncio.Event,
    force_polling: bool | None,
    debounce_ms: int,
    step_ms: int,
) -> None:
    dirs = options.watch_dirs()
    if not dirs:
        return
    async for changes in awatch(
        *dirs,
        stop_event=stop,
        debounce=debounce_ms,
        step=step_ms,
        force_polling=force_polling,
        recursive=True,
    ):
        kinds: set[str] = set()
        paths: list[Path] = []
        for _change, raw in changes:
            path = Path(raw)
            found = classify_change(options, path)
            if found:
                kinds |= found
                paths.append(path)
        if kinds:
            post.post_message(FilesChanged(kinds, paths))
