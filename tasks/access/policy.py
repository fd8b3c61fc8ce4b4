"""Authorize first: one rule, decided on access classes, applied as a mask or as a Lance filter.

A row is visible to a principal when its tenant equals the principal's, one of its groups is
among the principal's groups, its document is not excluded (tombstoned), and the query time is
inside its validity interval (tasks.access.validity). Anything missing or malformed (no tenant,
no groups, empty strings) is denied: the policy fails closed.

`AccessPolicy` holds the rule for one principal. It decides on an *access class* — one (tenant,
groups) combination rows share — and every form is derived from that decision: the mask over a
table or a generation view reads the decision per class (`access_of` groups the rows), and the
LanceDB/DataFusion filter states the same two conditions in SQL. The forms are tested against
each other on random rows and principals (tests/access/test_policy.py). `AllowedSet` joins the
policy with the time rule, evaluated at query time.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.retrieval import AccessDenied, Principal
from tasks.access import validity
from tasks.access.validity import ValidityWindow, validity_where

_SAFE = re.compile(r"^[\w.@:/+-]+$")  # identifiers that can go into a SQL literal unchanged
NO_POLICY = -1  # a row whose tenant or groups are missing: no principal may see it


def is_safe_name(name: str) -> bool:
    """A tenant or group name that can stand in a filter literal unchanged."""
    return bool(_SAFE.match(name))


def check_principal(principal: Principal) -> None:
    """Refuse a principal that could never match a row or that would break the filter."""
    names = [principal.tenant, *principal.groups]
    if not principal.tenant or not principal.groups:
        raise AccessDenied(f"principal {principal.principal_id!r} has no tenant or no groups; "
                           "give it a tenant and at least one group")
    bad = [n for n in names if not _SAFE.match(n)]
    if bad:
        raise AccessDenied(f"principal {principal.principal_id!r}: invalid tenant/group names {bad}")


def sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class AccessClass:
    """One (tenant, groups) combination some rows share: what authorization decides on."""

    tenant: str | None
    groups: tuple[str, ...]

    @classmethod
    def of(cls, tenant: str | None, groups: Iterable[str | None] | None) -> "AccessClass":
        """From one row's stored values: a null group name matches no principal's group."""
        return cls(tenant, tuple(g for g in groups or () if g is not None))


def _encoded(column: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    enc = pc.dictionary_encode(column)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks() if enc.num_chunks else pa.array([], pa.dictionary(pa.int32(), pa.string()))
    return enc


def access_of(table: pa.Table) -> tuple[np.ndarray, list[AccessClass]]:
    """Rows grouped by (tenant, groups) as stored: each row's class (NO_POLICY where tenant or
    groups is null) and the classes. A class holds the stored values themselves, never names
    reparsed from a joined string: the key joins the groups' dictionary codes (digits, "," and
    "-1" for a null name), then "|" and the tenant, so no name can make two different
    combinations share a class. A null group name matches no principal's group (the other
    groups still count)."""
    groups = table.column("groups")
    if isinstance(groups, pa.ChunkedArray):
        groups = groups.combine_chunks() if groups.num_chunks else pa.array([], groups.type)
    if isinstance(groups, pa.LargeListArray):
        groups = groups.cast(pa.list_(groups.type.value_type))
    names = _encoded(groups.values)
    member = pc.cast(pc.fill_null(names.indices, -1), pa.string())
    coded = pa.ListArray.from_arrays(groups.offsets, member, mask=groups.is_null())
    key = _encoded(pc.binary_join_element_wise(pc.binary_join(coded, ","), table.column("tenant"), "|"))
    group_names = names.dictionary.to_pylist()
    classes = []
    for k in key.dictionary.to_pylist():  # the codes part holds no "|": the first one splits
        codes, tenant = k.split("|", 1)
        classes.append(AccessClass(tenant, tuple(group_names[int(c)] for c in codes.split(",")
                                                 if c and c != "-1")))
    # a key's dictionary index is its class; a null key (tenant or groups null) has no policy
    return key.indices.fill_null(NO_POLICY).to_numpy(zero_copy_only=False).astype(np.int32), classes


class AccessPolicy:
    """What one principal may see: the rule for who (tenant, groups) and what (documents not
    excluded). A principal that cannot be expressed safely is refused when the policy is built
    (AccessDenied), so every form below fails closed the same way."""

    def __init__(self, principal: Principal, excluded_doc_ids: Iterable[str] = ()):
        check_principal(principal)
        self.principal = principal
        self.tenant = principal.tenant
        self.groups = frozenset(principal.groups)
        self.excluded = tuple(sorted(set(excluded_doc_ids)))

    def admits(self, access: AccessClass) -> bool:
        """The rule: the class's tenant is the principal's and one of its groups is theirs."""
        return bool(access.tenant) and access.tenant == self.tenant and not self.groups.isdisjoint(access.groups)

    def class_mask(self, classes: Sequence[AccessClass]) -> np.ndarray:
        """The decision per class, with a trailing False that NO_POLICY (-1) reads."""
        return np.array([self.admits(c) for c in classes] + [False], dtype=bool)

    def rows(self, access_codes: np.ndarray, classes: Sequence[AccessClass],
             doc_codes: np.ndarray | None = None, doc_ids: np.ndarray | None = None) -> np.ndarray:
        """Rows (by access class code, and document code into `doc_ids`) the principal may see."""
        mask = self.class_mask(classes)[access_codes]
        if self.excluded and doc_codes is not None:
            codes = np.flatnonzero(np.isin(doc_ids, np.asarray(self.excluded, dtype=object)))
            if codes.size:
                mask &= ~np.isin(doc_codes, codes)
        return mask

    def mask(self, table: pa.Table, access: tuple[np.ndarray, list[AccessClass]] | None = None) -> np.ndarray:
        """Rows of `table` (tenant, groups, doc_id) the principal may see (`access`: the
        table's `access_of`, where the caller keeps it)."""
        codes, classes = access if access is not None else access_of(table)
        mask = self.class_mask(classes)[codes]
        if self.excluded:
            hit = pc.is_in(table.column("doc_id"), value_set=pa.array(self.excluded, pa.string()))
            mask &= ~pc.fill_null(hit, False).to_numpy(zero_copy_only=False)
        return mask

    @property
    def where(self) -> str:
        """The same rule as a LanceDB/DataFusion filter, for `.where(..., prefilter=True)`: an
        empty or null tenant never equals the principal's (checked non-empty), and
        array_has_any of a null or empty list is not true."""
        groups = ", ".join(sql_literal(g) for g in self.principal.groups)
        # No `groups IS NOT NULL`: array_has_any of a null list is null, which no filter keeps, and
        # that clause is one the scalar index cannot answer: LanceDB then read every row id of the
        # generation to build the prefilter (55 ms a query at a million chunks).
        clause = f"tenant = {sql_literal(self.tenant)} AND array_has_any(groups, [{groups}])"
        if self.excluded:
            clause += f" AND doc_id NOT IN ({', '.join(sql_literal(d) for d in self.excluded)})"
        return clause

    def allowed_set(self, view, as_of: datetime | None = None) -> "AllowedSet":
        """The prefilter of every channel over a generation view (`view.access_codes`,
        `view.access_classes`, `view.doc_codes`, `view.doc_ids`, `view.validity`)."""
        return AllowedSet(self.rows(view.access_codes, view.access_classes, view.doc_codes, view.doc_ids),
                          self.where, view.validity, as_of)


class AllowedSet:
    """What one principal may see in one generation, in the two forms the channels apply before
    any scoring: a mask over the view's rows and the same policy as a Lance filter.

    Who (tenant, groups) and what (tombstones) are fixed when it is built; when (validity) is
    evaluated at each use: `as_of` fixes the query time, otherwise the clock, so an embargo
    lifts by itself. The mask for a time is cached until the next validity bound of any chunk.
    """

    def __init__(self, policy: np.ndarray, policy_where: str, validity: ValidityWindow | None = None,
                 as_of: datetime | None = None):
        self.as_of = as_of
        self._policy = policy
        self._policy_where = policy_where
        # a generation without the columns (published before intervals) has no bound: no time filter
        self._validity = validity
        self._combined: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def of_table(cls, table: pa.Table, principal: Principal, excluded_doc_ids: Iterable[str] = (),
                 as_of: datetime | None = None) -> "AllowedSet":
        """From a chunks table (tenant, groups, doc_id, and valid_from/valid_to where present)."""
        policy = AccessPolicy(principal, excluded_doc_ids)
        return cls(policy.mask(table), policy.where, ValidityWindow.of(table), as_of)

    def query_time(self) -> datetime:
        return self.as_of or validity.now_utc()

    @property
    def bounded(self) -> bool:
        return self._validity is not None and self._validity.bounded

    @property
    def mask(self) -> np.ndarray:
        """The rows a search may score now (never modified by callers: copy before changing)."""
        valid = self._validity.mask_at(self.query_time()) if self._validity is not None else None
        if valid is None:
            return self._policy
        cached = self._combined
        if cached is not None and cached[0] is valid:
            return cached[1]
        combined = self._policy & valid
        self._combined = (valid, combined)
        return combined

    @property
    def where(self) -> str:
        if not self.bounded:
            return self._policy_where
        return f"{self._policy_where} AND {validity_where(self.query_time())}"

    @property
    def count(self) -> int:
        return int(self.mask.sum())
