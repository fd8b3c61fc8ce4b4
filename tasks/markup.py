"""Text from the archive shown as markdown (Prefect artifacts, forms) or on a terminal: escaped,
so that it reads as the characters it holds and does nothing else.

Ids, titles, passages and reasons come from what people deliver: a doc_id is whatever a sidecar,
an export or a file name says. Put into markdown raw, a backtick ends a code span, a pipe splits a
table row, a line break ends it, `[x](javascript:…)` becomes a live link and `<img onerror=…>`
HTML; printed raw, an ESC sequence drives the reader's terminal. Every artifact and form builds
its markdown with these functions, never with an f-string over a raw value:

- `md_text`: inline text — markdown punctuation backslash-escaped, `<`, `>`, `&` as entities,
  control characters and line breaks shown as escapes: inert in a paragraph, heading or cell;
- `md_code`: an id in a code span, or `md_text` of it where a code span cannot hold it;
- `md_link`: a link to an http(s) or relative address only; any other target leaves its label
  as text;
- `md_row`: a table row; each cell not already escaped (an `Md`) goes through `md_text`;
- `md_block`: lines in a fenced code block whose fence no line can close;
- `visible`: text for a terminal, control characters as `\\x..` escapes.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

# C0, DEL and C1 (Unicode's Cc, exactly), the line and paragraph separators (Zl, Zp), and the
# bidirectional embeddings, overrides and isolates, which reorder what a reader sees.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_MARKUP = re.compile(r"([\\`*_\[\]|~#!{}()])")  # what is markup inside a line
_LINE_START = re.compile(r"^([-+=]|\d+[.)](?=\s|$))")  # what is markup at the start of a line
_SAFE_SCHEMES = ("http", "https")


class Md(str):
    """Markdown already escaped (built by this module): `md_row` takes it as it is."""


def is_control(ch: str) -> bool:
    """C0, DEL and C1 controls (ESC, NUL, CSI…), line and paragraph separators, bidi controls."""
    return CONTROL.fullmatch(ch) is not None


def control_characters(text: str) -> list[str]:
    """The control characters of `text`, each once, in order."""
    return list(dict.fromkeys(CONTROL.findall(text)))


def escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, keep: str = "") -> str:
    """`text` with every control character (but those in `keep`) written as an escape."""
    return CONTROL.sub(lambda m: m.group() if m.group() in keep else escape_char(m.group()), text)


def md_text(value: object) -> Md:
    """`value` as inert inline markdown text: shows exactly its characters."""
    text = visible(str(value))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKUP.sub(r"\\\1", text)
    return Md(_LINE_START.sub(lambda m: m.group(1)[:-1] + "\\" + m.group(1)[-1], text))


def md_code(value: object) -> Md:
    """`value` in a code span; as escaped text where a span cannot hold it (a backtick would end
    it, a pipe split a table row, a control character would reach the page raw)."""
    text = str(value)
    if not text or "`" in text or "|" in text or text != text.strip() or control_characters(text):
        return md_text(text)
    return Md(f"`{text}`")


def safe_url(url: str) -> bool:
    """An http(s) address or a relative one; no other scheme (javascript:, data:, file:…)."""
    if not url or any(is_control(ch) or ch.isspace() for ch in url):
        return False  # browsers drop tabs and line breaks inside a scheme: "java\tscript:"
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return False
    return scheme in _SAFE_SCHEMES or (scheme == "" and ":" not in url.split("/", 1)[0])


def md_link(label: object, url: str | None) -> Md:
    """A link to `url` where it is http(s) or relative; otherwise the label alone, as text."""
    if url is None or not safe_url(url):
        return md_text(label)
    target = url.replace("\\", "%5C").replace("(", "%28").replace(")", "%29") \
        .replace("<", "%3C").replace(">", "%3E").replace("`", "%60")
    return Md(f"[{md_text(label)}]({target})")


def md_row(cells: Iterable[object]) -> Md:
    """One table row: an `Md` cell as it is, any other value as `md_text` (pipes escaped)."""
    return Md("| " + " | ".join(c if isinstance(c, Md) else md_text("" if c is None else c)
                                for c in cells) + " |")


def md_block(lines: Iterable[str]) -> Md:
    """Lines in a fenced code block (inert whatever they hold), fenced longer than any run of
    backticks inside so that no line closes it."""
    body = [visible(str(line)) for line in lines]
    longest = max((len(run) for line in body for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return Md("\n".join([fence, *body, fence]))
