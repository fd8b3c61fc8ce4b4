"""A generation's per-row metadata as compact columns: the shared base of every channel.

The view holds what masks and rankings need — document, corpus, date, position and access
class of each row, as small integer codes, and the chunk ids as one Arrow array — never the
texts, spans or vectors. Text and spans are fetched from the generation's Lance version for
the rows a channel returns, and only for those (`fetch`). About 30 bytes a row plus the chunk
id: a million chunks is ~70 MB (16 bytes a row more where validity intervals are present).
"""
from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.retrieval import DocHit, Hit
from tasks.access.policy import AccessClass, access_of
from tasks.access.validity import ValidityWindow

META_COLUMNS = ["chunk_id", "doc_id", "corpus", "date", "tenant", "groups", "ordinal"]
VALIDITY_COLUMNS = ["valid_from", "valid_to"]  # absent from generations published before them
OCR_COLUMN = "ocr_quality"  # absent from generations published before it: unknown everywhere
HIT_COLUMNS = ["text", "char_start", "char_end", "page_start"]

NO_DAY = np.iinfo(np.int32).min  # a missing or unparseable date

Fetch = Callable[[np.ndarray, list[str]], pa.Table]  # rows (positions) → those columns, in order


_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_EPOCH = dt.date(1970, 1, 1)


def to_day(date: str | None) -> int | None:
    """Days since 1970-01-01 of an ISO date (a timestamp's date part counts); None otherwise.

    Strict on purpose: numpy would also read "today", "now" and "NaT" as dates, so a filter
    argument could move with the clock or land on the missing-date sentinel.
    """
    if not date:
        return None
    head = str(date)[:10]
    if not _ISO_DAY.match(head) or len(str(date)) > 10 and str(date)[10] not in "T ":
        return None
    try:
        return (dt.date.fromisoformat(head) - _EPOCH).days
    except ValueError:
        return None


def _codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list]:
    """Dictionary codes (int32, -1 for null) and the distinct values."""
    enc = pc.dictionary_encode(column)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks() if enc.num_chunks else pa.array([], pa.dictionary(pa.int32(), pa.string()))
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
    return codes, enc.dictionary.to_pylist()


@dataclass
class GenerationView:
    chunk_ids: pa.Array  # row → chunk id
    doc_codes: np.ndarray  # int32, row → index into doc_ids
    doc_ids: np.ndarray  # distinct document ids (object)
    corpus_codes: np.ndarray  # int32
    corpus_names: list[str | None]
    date_codes: np.ndarray  # int32 (-1: no date)
    date_values: list[str | None]
    days: np.ndarray  # int32 days since 1970-01-01, NO_DAY when missing
    ordinal: np.ndarray  # int32
    access_codes: np.ndarray  # int32, row → index into access_classes (policy.NO_POLICY: none)
    access_classes: list[AccessClass]
    fetch: Fetch
    row_ids: np.ndarray | None = None  # sorted Lance _rowid of each row (dense results map back)
    validity: ValidityWindow | None = None  # each row's validity interval (the time rule)
    # float32, row → its document's OCR quality (0–1, NaN: unknown); None: none recorded
    ocr_quality: np.ndarray | None = None

    @classmethod
    def from_table(cls, table: pa.Table, fetch: Fetch | None = None,
                   row_ids: np.ndarray | None = None) -> "GenerationView":
        """From the metadata columns of a generation (`fetch` defaults to reading `table`)."""
        doc_codes, doc_ids = _codes(table.column("doc_id"))
        corpus_codes, corpus_names = _codes(table.column("corpus"))
        date_codes, date_values = _codes(table.column("date"))
        value_days = np.array([d if (d := to_day(v)) is not None else NO_DAY for v in date_values],
                              dtype=np.int32)
        days = np.where(date_codes >= 0, value_days[np.maximum(date_codes, 0)] if value_days.size
                        else NO_DAY, NO_DAY).astype(np.int32)
        access_codes, access_classes = access_of(table)
        if fetch is None:
            def fetch(rows, columns, _t=table):
                return _t.select(columns).take(pa.array(rows, pa.int64()))
        ocr = table.column(OCR_COLUMN).to_numpy(zero_copy_only=False).astype(np.float32) \
            if OCR_COLUMN in table.schema.names else None  # nulls read as NaN
        return cls(chunk_ids=table.column("chunk_id").combine_chunks(), doc_codes=doc_codes,
                   doc_ids=np.asarray(doc_ids, dtype=object), corpus_codes=corpus_codes,
                   corpus_names=corpus_names, date_codes=date_codes, date_values=date_values,
                   days=days, ordinal=table.column("ordinal").to_numpy(zero_copy_only=False).astype(np.int32),
                   access_codes=access_codes, access_classes=access_classes, fetch=fetch,
                   row_ids=row_ids, validity=ValidityWindow.of(table), ocr_quality=ocr)

    @classmethod
    def from_lance(cls, lance_table) -> "GenerationView":
        """Scan only the metadata columns of the checked-out version; texts stay in Lance."""
        dataset = lance_table.to_lance()
        stored = set(dataset.schema.names)
        columns = META_COLUMNS + [c for c in [*VALIDITY_COLUMNS, OCR_COLUMN] if c in stored]
        meta = dataset.to_table(columns=columns, with_row_id=True)
        row_ids = meta.column("_rowid").to_numpy().astype(np.uint64)

        def fetch(rows, columns):
            return dataset.take(np.asarray(rows, np.int64).tolist(), columns=columns)
        return cls.from_table(meta.drop_columns(["_rowid"]), fetch=fetch, row_ids=row_ids)

    def __len__(self) -> int:
        return len(self.chunk_ids)

    # lookups ----------------------------------------------------------------------------------
    def rows_of_row_ids(self, row_ids: np.ndarray) -> np.ndarray:
        """Positions of Lance `_rowid`s (as a search returns them)."""
        if self.row_ids is None:
            return np.asarray(row_ids, np.int64)
        pos = np.searchsorted(self.row_ids, np.asarray(row_ids, np.uint64))
        if (pos >= len(self.row_ids)).any() or (self.row_ids[np.minimum(pos, len(self) - 1)] != row_ids).any():
            raise KeyError("a search returned rows that are not in this generation's version")
        return pos.astype(np.int64)

    def document_count(self, rows: np.ndarray) -> int:
        """How many distinct documents the rows belong to."""
        return int(np.unique(self.doc_codes[rows]).size)

    def row_of(self, chunk_id: str) -> int:
        """Position of a chunk id; KeyError when the generation has no such chunk."""
        order = self._order()
        ids = self.chunk_ids
        lo, hi = 0, len(order)
        while lo < hi:  # binary search over the sorted permutation, no dict of every id
            mid = (lo + hi) // 2
            if ids[int(order[mid])].as_py() < chunk_id:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(order) and ids[int(order[lo])].as_py() == chunk_id:
            return int(order[lo])
        raise KeyError(chunk_id)

    def _doc_sizes(self) -> np.ndarray:
        """Chunks per document (the judge reads a chunk's position in its document)."""
        sizes = getattr(self, "_sizes", None)
        if sizes is None:
            sizes = self._sizes = np.bincount(self.doc_codes, minlength=len(self.doc_ids))
        return sizes

    def _order(self) -> np.ndarray:
        order = getattr(self, "_sorted", None)
        if order is None:
            order = pc.sort_indices(self.chunk_ids).to_numpy().astype(np.int32)
            self._sorted = order
        return order

    def corpus_code(self, corpus: str) -> int:
        try:
            return self.corpus_names.index(corpus)
        except ValueError:
            return -2  # matches no row

    def corpora(self, mask: np.ndarray) -> list[str]:
        # a count per code, not np.unique: no sort of the allowed rows on every question
        present = np.bincount(self.corpus_codes[mask] + 1, minlength=len(self.corpus_names) + 1)[1:]
        return sorted(self.corpus_names[c] for c in np.flatnonzero(present))

    def date_of(self, row: int) -> str | None:
        code = int(self.date_codes[row])
        return self.date_values[code] if code >= 0 else None

    def ocr_quality_of(self, chunk_id: str) -> float | None:
        """The OCR quality of a chunk's document; None when unknown or not recorded."""
        if self.ocr_quality is None:
            return None
        value = float(self.ocr_quality[self.row_of(chunk_id)])
        return None if np.isnan(value) else value

    def doc_of(self, row: int) -> str:
        return self.doc_ids[self.doc_codes[row]]

    # masks ------------------------------------------------------------------------------------
    def filter_mask(self, allowed: np.ndarray, corpus: str | None = None,
                    date_from: str | None = None, date_to: str | None = None) -> np.ndarray:
        """The allowed rows narrowed by corpus and an inclusive date range (undated rows fall
        outside any range)."""
        mask = allowed.copy()
        if corpus is not None:
            mask &= self.corpus_codes == self.corpus_code(corpus)
        lo, hi = to_day(date_from), to_day(date_to)
        if date_from is not None and lo is None or date_to is not None and hi is None:
            raise ValueError(f"unparseable date range {date_from!r}..{date_to!r} (use YYYY-MM-DD)")
        if lo is not None:
            mask &= (self.days != NO_DAY) & (self.days >= lo)
        if hi is not None:
            mask &= (self.days != NO_DAY) & (self.days <= hi)
        return mask

    # hits -------------------------------------------------------------------------------------
    def chunk_hits(self, rows: np.ndarray, scores: np.ndarray) -> list[Hit]:
        """Hits for these rows, fetching their text and offsets (one read for all of them)."""
        rows = np.asarray(rows, np.int64)
        if rows.size == 0:
            return []
        got = self.fetch(rows, HIT_COLUMNS).to_pydict()
        sizes = self._doc_sizes()
        return [Hit(chunk_id=self.chunk_ids[int(r)].as_py(), doc_id=self.doc_of(int(r)),
                    score=float(s), rank=i + 1, corpus=self.corpus_names[self.corpus_codes[r]],
                    date=self.date_of(int(r)), text=got["text"][i],
                    page_start=int(got["page_start"][i] or 1), char_start=int(got["char_start"][i]),
                    char_end=int(got["char_end"][i]), ordinal=int(self.ordinal[r]),
                    doc_chunks=int(sizes[self.doc_codes[r]]))
                for i, (r, s) in enumerate(zip(rows.tolist(), scores.tolist()))]

    def doc_hit(self, row: int, score: float, rank: int) -> DocHit:
        return DocHit(doc_id=self.doc_of(row), score=float(score), rank=rank,
                      best_chunk_id=self.chunk_ids[row].as_py(),
                      corpus=self.corpus_names[self.corpus_codes[row]], date=self.date_of(row))


def top_rows(scores: np.ndarray, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best rows under `mask` with a positive score, best first; ties by row order so
    results are deterministic."""
    cand = np.flatnonzero(mask & (scores > 0))
    if cand.size == 0 or k <= 0:
        return cand[:0], scores[cand[:0]]
    if cand.size > 4 * k:  # partial selection first: a million candidates need not be sorted
        kth = np.partition(-scores[cand], k - 1)[k - 1]
        cand = cand[-scores[cand] <= kth]
    order = np.lexsort((cand, -scores[cand]))[:k]
    rows = cand[order]
    return rows, scores[rows]


def best_rows(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """`top_rows` of candidate rows and their scores (a sparse score vector)."""
    keep = scores > 0
    rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:max(k, 0)]
    return rows[order], scores[order]


def max_pool(view: GenerationView, rows: np.ndarray, scores: np.ndarray,
             k: int) -> list[DocHit]:
    """Documents by their best chunk. `rows`/`scores` are candidate chunks in any order."""
    if rows.size == 0:
        return []
    wide = max(64 * k, 4096)
    if rows.size > 4 * wide:
        # The k best documents are the first k distinct ones among the best chunks; keep every
        # chunk scoring at least the wide-th best (ties included), and widen if that is short.
        kth = np.partition(-scores, wide - 1)[wide - 1]
        keep = -scores <= kth
        if np.unique(view.doc_codes[rows[keep]]).size >= k:
            rows, scores = rows[keep], scores[keep]
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
