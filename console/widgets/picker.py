"""A file picker for spec files: a directory tree that only lists YAML files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DirectoryTree, Static


class YamlTree(DirectoryTree):
    """Directories and ``*.yml`` / ``*.yaml`` files; hidden entries left out."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [
            p
            for p in paths
            if not p.name.startswith(".") and (p.is_dir() or p.suffix in (".yml", ".yaml"))
        ]


class PickSpec(ModalScreen[Path | None]):
    """Pick a spec file; dismisses with its path, or None on escape."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    PickSpec { align: center middle; }
    PickSpec > Vertical {
        width: 80%; height: 80%; border: thick $primary; background: $surface; padding: 0 1;
    }
    PickSpec YamlTree { height: 1fr; }
    """

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"[b]Open a spec[/b] under {self.root} (enter opens, escape cancels)")
            yield YamlTree(self.root, id="pick-tree")

    def on_mount(self) -> None:
        self.query_one(YamlTree).focus()

    def on_directory_tree_file_selected(self, event: DirectoryTree.FileSelected) -> None:
        event.stop()
        self.dismiss(event.path)

    def action_cancel(self) -> None:
        self.dismiss(None)
