"""A generation's chunks as columns in memory: the shared base of every channel.

The view holds the metadata and text columns (never the vectors, which stay in LanceDB) as
numpy arrays indexed by row, so channels work with masks and score arrays and only build
pydantic hits for the few rows they return.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.retrieval import ChunkHit, DocHit

VIEW_COLUMNS = ["chunk_id", "doc_id", "corpus", "date", "tenant", "groups", "ordinal", "text",
                "char_start", "char_end", "page_start", "valid_from", "valid_to"]

NO_DAY = np.iinfo(np.int64).min  # a missing or unparseable date


def parse_days(dates: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """ISO dates → days since 1970-01-01 (int64); missing or malformed → NO_DAY."""
    out = np.full(len(dates), NO_DAY, dtype=np.int64)
    for i, d in enumerate(dates.to_pylist()):
        day = to_day(d)
        if day is not None:
            out[i] = day
    return out


def to_day(date: str | None) -> int | None:
    if not date:
        return None
    try:
        return int(np.datetime64(str(date)[:10], "D").astype(np.int64))
    except ValueError:
        return None


@dataclass
class GenerationView:
    table: pa.Table
    chunk_ids: np.ndarray = field(init=False)
    doc_codes: np.ndarray = field(init=False)  # row → index into doc_ids
    doc_ids: np.ndarray = field(init=False)
    corpus: np.ndarray = field(init=False)
    days: np.ndarray = field(init=False)
    ordinal: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        t = self.table
        self.chunk_ids = np.asarray(t.column("chunk_id").to_pylist(), dtype=object)
        enc = pc.dictionary_encode(t.column("doc_id")).combine_chunks()
        self.doc_codes = enc.indices.to_numpy().astype(np.int64)
        self.doc_ids = np.asarray(enc.dictionary.to_pylist(), dtype=object)
        self.corpus = np.asarray(t.column("corpus").to_pylist(), dtype=object)
        self.days = parse_days(t.column("date"))
        self.ordinal = t.column("ordinal").to_numpy(zero_copy_only=False)
        self._row_of = {c: i for i, c in enumerate(self.chunk_ids)}
        self._texts: list[str] | None = None
        self._dates = t.column("date").to_pylist()

    @classmethod
    def from_table(cls, table: pa.Table) -> "GenerationView":
        return cls(table.select(VIEW_COLUMNS))

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def texts(self) -> list[str]:
        if self._texts is None:
            self._texts = self.table.column("text").to_pylist()
        return self._texts

    def row_of(self, chunk_id: str) -> int:
        return self._row_of[chunk_id]

    def corpora(self, mask: np.ndarray) -> list[str]:
        return sorted(set(self.corpus[mask].tolist()))

    # masks ------------------------------------------------------------------------------------
    def filter_mask(self, allowed: np.ndarray, corpus: str | None = None,
                    date_from: str | None = None, date_to: str | None = None) -> np.ndarray:
        """The allowed rows narrowed by corpus and an inclusive date range (undated rows fall
        outside any range)."""
        mask = allowed.copy()
        if corpus is not None:
            mask &= self.corpus == corpus
        lo, hi = to_day(date_from), to_day(date_to)
        if date_from is not None and lo is None or date_to is not None and hi is None:
            raise ValueError(f"unparseable date range {date_from!r}..{date_to!r} (use YYYY-MM-DD)")
        if lo is not None:
            mask &= (self.days != NO_DAY) & (self.days >= lo)
        if hi is not None:
            mask &= (self.days != NO_DAY) & (self.days <= hi)
        return mask

    # hits -------------------------------------------------------------------------------------
    def chunk_hit(self, row: int, score: float, rank: int) -> ChunkHit:
        t = self.table
        return ChunkHit(
            chunk_id=self.chunk_ids[row], doc_id=self.doc_ids[self.doc_codes[row]],
            score=float(score), rank=rank, corpus=self.corpus[row], date=self._dates[row],
            text=self.texts[row], page_start=int(t.column("page_start")[row].as_py() or 1),
            char_start=int(t.column("char_start")[row].as_py()),
            char_end=int(t.column("char_end")[row].as_py()),
        )

    def chunk_hits(self, rows: np.ndarray, scores: np.ndarray) -> list[ChunkHit]:
        return [self.chunk_hit(int(r), float(s), i + 1) for i, (r, s) in enumerate(zip(rows, scores))]

    def doc_hit(self, row: int, score: float, rank: int) -> DocHit:
        return DocHit(doc_id=self.doc_ids[self.doc_codes[row]], score=float(score), rank=rank,
                      best_chunk_id=self.chunk_ids[row], corpus=self.corpus[row],
                      date=self._dates[row])


def top_rows(scores: np.ndarray, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best rows under `mask` with a positive score, best first; ties by row order so
    results are deterministic."""
    cand = np.flatnonzero(mask & (scores > 0))
    if cand.size == 0 or k <= 0:
        return cand[:0], scores[cand[:0]]
    order = np.lexsort((cand, -scores[cand]))[:k]
    rows = cand[order]
    return rows, scores[rows]


def max_pool(view: GenerationView, rows: np.ndarray, scores: np.ndarray,
             k: int) -> list[DocHit]:
    """Documents by their best chunk. `rows`/`scores` are candidate chunks in any order."""
    if rows.size == 0:
        return []
    order = np.lexsort((rows, -scores))
    rows, scores = rows[order], scores[order]
    _, first = np.unique(view.doc_codes[rows], return_index=True)
    first = np.sort(first)[:k]  # position in score order of each document's best chunk
    return [view.doc_hit(int(rows[i]), float(scores[i]), n + 1) for n, i in enumerate(first)]


def first_rows(view: GenerationView) -> np.ndarray:
    """Mask of each document's opening chunk (lowest ordinal)."""
    order = np.lexsort((view.ordinal, view.doc_codes))
    _, first = np.unique(view.doc_codes[order], return_index=True)
    mask = np.zeros(len(view), dtype=bool)
    mask[order[first]] = True
    return mask
