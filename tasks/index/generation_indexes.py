"""Build a generation's indexes: the vector index on its Lance version (`dense_build`) and the
lexical postings under its index folder (`lexical_build`).

Publish calls `index_generation` on the new table version before tagging it, so the tag names a
version that carries its indexes; a purge that rewrites the version calls it again with the
recorded parameters, and `mabillon reindex` rebuilds a lexical index that went missing. What was
built, with which parameters and how long it took, is the `IndexContract` in the generation
manifest.
"""
from __future__ import annotations

import pyarrow as pa

from schemas.indexes import IndexContract, IndexSettings
from schemas.retrieval import RetrievalSettings
from tasks.index.dense_build import build_dense
from tasks.index.lexical_build import build_lexical
from tasks.store.location import Location

# What the lexical index is built from: the texts, and the access columns its per-class
# document frequencies are counted by.
LEXICAL_COLUMNS = ["chunk_id", "text", "tenant", "groups"]


def index_generation(lance_table, chunks: pa.Table, index_dir: Location, index: IndexSettings,
                     retrieval: RetrievalSettings, like: IndexContract | None = None) -> IndexContract:
    """Indexes for a freshly written version (`chunks`: its LEXICAL_COLUMNS, in row order).
    With `like`, the same algorithm and parameters as a previous contract."""
    dense = build_dense(lance_table, chunks.num_rows, index, like.dense if like else None)
    stem, ngrams = ((like.lexical.stem, like.lexical.char_ngrams) if like and like.lexical
                    else (retrieval.stem, retrieval.char_ngrams))
    lexical = build_lexical(index_dir, chunks, stem, ngrams)
    return IndexContract(dense=dense, lexical=lexical)
