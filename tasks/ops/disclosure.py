"""What an operator's artifact may name: the Prefect UI shows every artifact of a home to every
person who reaches it (researchers of every tenant asking with their tokens), so an artifact
about the archive as a whole names only what anyone may see anyway.

A document is *public* when the default principal — anyone, no token — may read it now: its
tenant is the default tenant, one of its groups is a default group, the present moment is inside
its validity interval (no embargo still running, not withdrawn) and it is not deleted. Public
documents are named by id; every other one is only counted, per tenant. The full lists stay with
the operator: `mabillon diff`, `mabillon documents`, the manifests and release records on disk.
Quarantined inputs have no trusted access metadata (that is often why they were refused), so
artifacts count them and never name them: the refusals table counts inputs per reason, each
reason with the input's name, its path and anything quoted in it (a member or file name an error
message repeats) taken out.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from schemas.retrieval import AccessDenied, Principal
from tasks.access.policy import AccessClass, AccessPolicy
from tasks.store.layout import StoreLayout


@dataclass(frozen=True)
class Disclosure:
    """Which sources an artifact may name (`public`) and the tenant of each of the others."""

    public: frozenset[str] = frozenset()
    tenants: dict[str, str] = field(default_factory=dict)

    def split(self, source_ids: list[str]) -> tuple[list[str], Counter]:
        """(the ids that may be shown, the count of the others per tenant)."""
        shown = [s for s in source_ids if s in self.public]
        hidden = Counter(self.tenants.get(s) or "unknown tenant" for s in source_ids if s not in self.public)
        return shown, hidden

    def then(self, later: "Disclosure") -> "Disclosure":
        """For a diff from this generation to `later`: `later` decides for the sources it holds,
        this one for those it removed."""
        return Disclosure(public=later.public | (self.public - set(later.tenants)),
                          tenants={**self.tenants, **later.tenants})


def disclosure_of(revisions: pa.Table, public: Principal | None, now: datetime,
                  deleted: set[str]) -> Disclosure:
    """From the current revisions of a generation (source_id, doc_id, tenant, groups, valid_from,
    valid_to, is_current). Without a public principal, or one the policy refuses, nothing is public."""
    tenants, shown = {}, set()
    try:
        policy = AccessPolicy(public) if public is not None else None
    except AccessDenied:  # the default principal can read nothing: nothing is public
        policy = None
    for row in revisions.to_pylist():
        if not row.get("is_current", True):
            continue
        sid = row["source_id"]
        tenants[sid] = row["tenant"] or ""
        valid_from, valid_to = row.get("valid_from"), row.get("valid_to")
        if (policy is not None and policy.admits(AccessClass.of(row["tenant"], row["groups"]))
                and row["doc_id"] not in deleted
                and (valid_from is None or valid_from <= now) and (valid_to is None or now < valid_to)):
            shown.add(sid)
    return Disclosure(public=frozenset(shown), tenants=tenants)


def generation_disclosure(layout: StoreLayout, generation: str, public: Principal | None,
                          now: datetime, deleted: set[str]) -> Disclosure:
    from tasks.store.lineage_store import read_lineage_table

    revisions = read_lineage_table(layout, generation, "revisions",
                                   ["source_id", "doc_id", "tenant", "groups", "valid_from",
                                    "valid_to", "is_current"])
    return disclosure_of(revisions, public, now, deleted)


def quarantine_markdown(quarantined: list) -> list[str]:
    """Counted, never named: refused inputs carry no trusted access metadata and their names are
    document ids (see above); the manifest on disk names each with its reason."""
    if not quarantined:
        return []
    return ["", f"## Quarantined inputs ({len(quarantined)})", "",
            f"{len(quarantined)} input(s) were refused; the generation's manifest names each with "
            "its reason (`mabillon ingest` printed them)."]


REASON_CHARS = 160
REFUSAL_ROWS = 30  # reasons listed; the count of the rest follows in one row
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|«[^»]*»|`[^`]*`")
_PATHLIKE = re.compile(r"(?:[a-z][a-z0-9+.-]*://|~?/)\S*", re.I)


def refusal_reason(uri: str, reason: str) -> str:
    """`reason` with nothing of the input's name: its URI, path, file name and stem, anything
    quoted, any path or URI. What stays says why (\"encrypted PDF\", \"not UTF-8\")."""
    path = unquote(urlsplit(uri).path) if "://" in uri else uri
    name = PurePosixPath(path).name
    names = {uri, path, name, PurePosixPath(name).stem}
    text = reason
    for n in sorted((n for n in names if len(n) >= 3), key=len, reverse=True):
        text = text.replace(n, "…")
    text = _PATHLIKE.sub("…", _QUOTED.sub("…", text))
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 1] + "…"


def refusal_rows(quarantined: list) -> list[dict]:
    """How many inputs were refused for each reason, most frequent first (named by no input)."""
    counts = Counter(refusal_reason(q.uri, q.reason) for q in quarantined)
    ranked = counts.most_common()
    rows = [{"reason": reason, "inputs refused": n} for reason, n in ranked[:REFUSAL_ROWS]]
    if len(ranked) > REFUSAL_ROWS:
        rows.append({"reason": f"{len(ranked) - REFUSAL_ROWS} other reason(s)",
                     "inputs refused": sum(n for _, n in ranked[REFUSAL_ROWS:])})
    return rows


def refused_words(n: int) -> str:
    """What a run's state says when it refused inputs."""
    inputs = f"{n} input{'s' if n != 1 else ''}"
    return f"{n} refused: {inputs} quarantined, nothing else lost (table 'refused-inputs')"
