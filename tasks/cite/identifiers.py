"""The library's identifier of a document, read from its revision's metadata whatever the key:
an ARK (`ark:/NAAN/name`, bare or inside a resolver's URL) where there is one, else a value
under a key that says it identifies (`identifier`, `ark`, `catalogue_id`, ...)."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

ARK = re.compile(r"ark:/?\d{5,}/[^\s?#\"'<>]+")
IDENTIFYING = re.compile(r"(^|_)(ark|identifiers?|id_?bnf|catalog(ue)?_?id|urn|doi|handle)($|_)", re.I)


def _values(value: Any, key: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """(key, string value) pairs of a metadata tree, nested dicts and lists included."""
    if depth > 4:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _values(v, str(k), depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _values(v, key, depth + 1)
    elif isinstance(value, str) and value.strip():
        yield key, value.strip()


def library_identifier(metadata: dict[str, Any]) -> str | None:
    """The ARK (normalised to `ark:/NAAN/name`) if any value holds one; else the first value
    under an identifying key; else None."""
    pairs = list(_values(metadata))
    for _, value in pairs:
        found = ARK.search(value)
        if found:
            ark = found.group().rstrip(".,;)")
            return ark if ark.startswith("ark:/") else "ark:/" + ark[len("ark:"):]
    return next((v for k, v in pairs if IDENTIFYING.search(k)), None)


def metadata_of(metadata_json: str | None) -> dict[str, Any]:
    try:
        value = json.loads(metadata_json or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def container_of(metadata: dict[str, Any]) -> str | None:
    """The newspaper (or series) a document belongs to, when its metadata names one."""
    for key in ("newspaper", "journal", "periodical", "publication", "container", "container_title",
                "series", "host_title", "source_title"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, dict):
            title = value.get("title")
            if isinstance(title, str) and title.strip():
                return title.strip()
    return None
