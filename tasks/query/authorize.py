"""Authorize first: the principal's allowed set, as a numpy mask and as a LanceDB filter.

Both forms express one policy — a chunk is visible when its tenant equals the principal's,
one of its groups is among the principal's groups, and its document is not excluded
(tombstoned). Anything missing or malformed (no tenant, no groups, empty strings) is denied:
the policy fails closed. The two forms are tested against each other.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.retrieval import AccessDenied, Principal

_SAFE = re.compile(r"^[\w.@:/+-]+$")  # identifiers that can go into a SQL literal unchanged


def check_principal(principal: Principal) -> None:
    """Refuse a principal that could never match a chunk or that would break the filter."""
    names = [principal.tenant, *principal.groups]
    if not principal.tenant or not principal.groups:
        raise AccessDenied(f"principal {principal.principal_id!r} has no tenant or no groups; "
                           "give it a tenant and at least one group")
    bad = [n for n in names if not _SAFE.match(n)]
    if bad:
        raise AccessDenied(f"principal {principal.principal_id!r}: invalid tenant/group names {bad}")


def allowed_mask(chunks_table: pa.Table, principal: Principal,
                 excluded_doc_ids: Iterable[str] = ()) -> np.ndarray:
    """Rows of `chunks_table` (needs tenant, groups, doc_id) the principal may see."""
    check_principal(principal)
    tenant = chunks_table.column("tenant")
    tenant_ok = pc.fill_null(pc.equal(tenant, principal.tenant), False)
    groups = chunks_table.column("groups").combine_chunks()
    # Explode the list column, test membership, fold back per row (null/empty lists → False).
    flat = pc.is_in(groups.flatten(), value_set=pa.array(principal.groups, pa.string()))
    flat = pc.fill_null(flat, False).to_numpy(zero_copy_only=False)
    parent = pc.list_parent_indices(groups).to_numpy()
    group_ok = np.zeros(len(chunks_table), dtype=bool)
    group_ok[parent[flat]] = True
    mask = tenant_ok.to_numpy(zero_copy_only=False) & group_ok
    excluded = list(excluded_doc_ids)
    if excluded:
        hit = pc.is_in(chunks_table.column("doc_id"), value_set=pa.array(excluded, pa.string()))
        mask &= ~pc.fill_null(hit, False).to_numpy(zero_copy_only=False)
    return mask


@dataclass(frozen=True)
class AllowedSet:
    """What one principal may see in one generation, in the two forms the channels apply
    before any scoring: a mask over the view's rows and the same policy as a Lance filter."""

    mask: np.ndarray
    where: str

    @property
    def count(self) -> int:
        return int(self.mask.sum())


def allowed_set(view, principal: Principal, excluded_doc_ids: Iterable[str] = ()) -> AllowedSet:
    """The prefilter of every channel: the principal's tenant and groups against each access
    class of the generation (`view.access_classes`), minus excluded (tombstoned) documents.

    The one place the allowed set is built; a further condition (a validity time, say) is
    added here, to the mask and the clause together.
    """
    check_principal(principal)
    groups = set(principal.groups)
    visible = np.array([bool(c.tenant) and c.tenant == principal.tenant and bool(groups & set(c.groups))
                        for c in view.access_classes] + [False], dtype=bool)
    mask = visible[view.access_codes]  # NO_POLICY (-1) reads the trailing False
    excluded = sorted(set(excluded_doc_ids))
    if excluded:
        codes = np.flatnonzero(np.isin(view.doc_ids, np.asarray(excluded, dtype=object)))
        if codes.size:
            mask &= ~np.isin(view.doc_codes, codes)
    return AllowedSet(mask=mask, where=allowed_where(principal, excluded))


def sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def allowed_where(principal: Principal, excluded_doc_ids: Iterable[str] = ()) -> str:
    """The same policy as a LanceDB/DataFusion filter, for `.where(..., prefilter=True)`."""
    check_principal(principal)
    groups = ", ".join(sql_literal(g) for g in principal.groups)
    clause = (f"tenant = {sql_literal(principal.tenant)} AND groups IS NOT NULL "
              f"AND array_has_any(groups, [{groups}])")
    excluded = sorted(set(excluded_doc_ids))
    if excluded:
        clause += f" AND doc_id NOT IN ({', '.join(sql_literal(d) for d in excluded)})"
    return clause

