"""Rows grouped by access class: each distinct (tenant, groups) the rows of a generation carry.

Authorization decides once per class (`tasks.query.view`, `tasks.query.authorize`), and the
lexical index counts its document frequencies per class (`tasks.index.lexical_build`), so that
a principal's BM25 statistics are a sum over the classes it may see.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NO_POLICY = -1  # a row whose tenant or groups are missing: no principal may see it


def dictionary_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list]:
    """Dictionary codes (int32, -1 for null) and the distinct values."""
    enc = pc.dictionary_encode(column)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks() if enc.num_chunks else pa.array([], pa.dictionary(pa.int32(), pa.string()))
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
    return codes, enc.dictionary.to_pylist()


@dataclass(frozen=True)
class AccessClass:
    """One (tenant, groups) combination some rows share: what authorization decides on."""

    tenant: str | None
    groups: tuple[str, ...]


def access_of(table: pa.Table) -> tuple[np.ndarray, list[AccessClass]]:
    """Rows grouped by (tenant, groups) as stored; each class keeps one row's actual values, so
    authorization decides on the real metadata, never on a reparsed key."""
    groups = table.column("groups")
    joined = pc.binary_join(groups, "\x1f")  # null or empty lists → null/"" (no group)
    key = pc.binary_join_element_wise(table.column("tenant"), joined, "\x1e")
    codes, _ = dictionary_codes(key)
    uniq, first = np.unique(codes, return_index=True)
    classes: list[AccessClass] = []
    remap = np.full(max(int(uniq.max()) + 1, 1) if uniq.size else 1, NO_POLICY, np.int32)
    tenants, lists = table.column("tenant"), groups
    for code, row in zip(uniq.tolist(), first.tolist()):
        if code < 0:
            continue  # tenant or groups null: no policy, never visible
        remap[code] = len(classes)
        classes.append(AccessClass(tenants[row].as_py(), tuple(lists[row].as_py() or ())))
    return np.where(codes >= 0, remap[np.maximum(codes, 0)], NO_POLICY).astype(np.int32), classes
