"""The starter pack: reviewed rules that ship with the release, one YAML file each.

They load first (policy rules of the same name override them), skip shadow,
and act at notify or below unless the operator enforces them, so an empty
policy repo still catches the recurring patterns seed 004 names.
"""

from pathlib import Path

#: Directory holding the starter rule files (``*.yml``).
STARTER_DIR: Path = Path(__file__).resolve().parent
