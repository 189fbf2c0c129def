"""Text shown inside Textual markup, as it is: the console's one ``escape``.

Rich's ``escape`` (and Textual's) only escapes a ``[`` that looks like the
start of a tag. Textual's own markup parser reads more than that as a tag: in
the keys screen the Timeline's ``[`` and ``]`` rows, one line apart, were
read as one tag and vanished with the text between them ("Earlier"). Escaping
every ``[`` is what Textual's parser needs; nothing else is special to it.
"""

from __future__ import annotations


def escape(text: str) -> str:
    """``text`` for a markup string: every ``[`` escaped, so it shows exactly as given."""
    return text.replace("[", "\\[")
