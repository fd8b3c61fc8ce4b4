"""The lexical index's on-disk format: its files, their dtypes, term hashing, the row-order
digest and where a generation keeps the index of one analysis.

Why not LanceDB's native FTS, bm25s or tantivy: all three bake corpus-wide statistics (document
frequency, average length) into their scores, so a forbidden document shifts the scores of the
allowed ones; one index per tenant would fix that between tenants but not between groups of one
tenant. This index stores raw term frequencies, so BM25 statistics are taken over exactly the
rows the principal may see, at query time, as the in-memory channel did (scores are identical).

Files, one folder per generation and analysis, each written whole (`meta.json` last: a reader
sees a complete index or none), read through the warehouse Location (local disk or S3):

- `rows.bin` (int32) and `tf.bin` (uint16): the postings, grouped by term, rows ascending
  within a term — read with positioned reads, one range per query term; never loaded whole.
- `indptr.npy` (int64, terms + 1), `hashes.npy` (uint64, sorted 64-bit term hashes),
  `columns.npy` (int32, the term column of each sorted hash), `lengths.npy` (float32 per row).
  Only these are held in memory: 20 bytes per term and 4 per row.
- `tokens.parquet`: the folded word tokens of the texts (``=`` terms, not scored) and their
  columns, so exact substring search can narrow its candidates without holding any text.
- `row_class.npy` (int32 per row, held in memory), `term_stats.bin` (per term: its range in
  `class_df.bin`, its largest tf and the shortest row holding it) and `class_df.bin` (per term
  and access class, the rows of that class holding it): what lets a query know each term's
  document frequency *over the principal's rows* before reading its postings, and so skip most
  of them (`top`). Indexes written before these files are scored exhaustively.

Why the statistics stay per principal and what that costs: document frequencies are a sum over
the access classes the principal's rows fall in, corrected for the rows of those classes it may
not see (tombstoned, outside their validity): a forbidden chunk still shifts no score. The
correction reads the postings of a term only where those rows are many (then the term is counted
exhaustively, as before).

Row numbers are positions in the generation's Lance table version; `chunk_digest` ties the
index to that row order.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from tasks.index.analyzer import analyzer_id
from tasks.store.location import Location

FORMAT = "postings-v1"
PRUNING = "class-df-v1"  # the optional files that let `top` skip postings
ROW, TF = np.dtype("<i4"), np.dtype("<u2")
TERM_STATS = np.dtype([("lo", "<i8"), ("hi", "<i8"), ("minlen", "<f4"), ("maxtf", "<u2"), ("pad", "<u2")])
CLASS_DF = np.dtype([("cls", "<i4"), ("n", "<i4")])
TOKEN_PREFIX = "="  # exact folded word tokens (substring candidates); never a BM25 term


def term_hashes(terms: Iterable[str]) -> np.ndarray:
    """Stable 64-bit hashes (BLAKE2b) of terms; collisions are refused at build time."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(), "little")
                        for t in terms), dtype=np.uint64)


def chunk_digest(chunk_ids: pa.Array | pa.ChunkedArray) -> str:
    """Digest of the chunk ids in row order (an index belongs to one row order)."""
    arr = chunk_ids.combine_chunks() if isinstance(chunk_ids, pa.ChunkedArray) else chunk_ids
    arr = pa.concat_arrays([arr.cast(pa.large_string())]) if len(arr) else pa.array([], pa.large_string())
    h = hashlib.sha256()
    _, offsets, data = arr.buffers()
    if offsets is not None:
        h.update(memoryview(offsets)[arr.offset * 8:(arr.offset + len(arr) + 1) * 8])
    if data is not None:
        h.update(memoryview(data))
    return h.hexdigest()[:16]


def lexical_folder(index_dir: Location, stem: bool, ngrams: int) -> Location:
    """The folder of the index of one analysis inside a generation's index folder."""
    return index_dir / f"lexical-{analyzer_id(stem, ngrams)}"
