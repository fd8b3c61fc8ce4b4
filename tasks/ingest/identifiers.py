"""What a document id may hold: printable text only.

An id is typed in a shell (`mabillon delete ID`), printed on terminals, put in links and
artifacts. One with NUL cannot be passed as a command-line argument at all (so the document
could never be deleted by name); one with ESC or CSI sequences rewrites the terminal of whoever
lists the documents; line breaks and bidi controls make it read as something else. Such an id
refuses its input at acquisition, with the reason, and the rest of the batch goes on.
"""
from __future__ import annotations

import unicodedata

from tasks.markup import control_characters, escape_char, visible

_NAMES = {"\x00": "NUL", "\x1b": "ESC", "\x9b": "CSI", "\x7f": "DEL", "\n": "line feed",
          "\r": "carriage return", "\t": "tab"}


def doc_id_problem(doc_id: str) -> str | None:
    """Why `doc_id` cannot name a document, or None."""
    found = control_characters(doc_id)
    if not found:
        return None
    named = ", ".join(f"{escape_char(ch)} {_NAMES.get(ch) or unicodedata.name(ch, 'control')}"
                      for ch in found[:3])
    return (f"doc_id {visible_repr(doc_id)} holds control characters ({named}): an id must be "
            "printable text; rename the file or fix the doc_id")


def visible_repr(text: str, limit: int = 80) -> str:
    """`text` quoted for a reason, control characters escaped, cut at `limit` characters."""
    shown = visible(text[:limit]) + ("…" if len(text) > limit else "")
    return f"'{shown}'"
