"""Chunk: sentence-boundary chunks under the embedding model's token limit.

Tokens are counted with the model's own tokenizer (through the embedder), so a chunk is never
longer than what the model reads; a sentence longer than the limit is split at word boundaries.
Chunk ids are deterministic: revision + segmenter + ordinal. Offsets point into the document's
raw text (pages joined with PAGE_JOINER); spans give the pages and boxes each chunk covers.
"""
from __future__ import annotations

import bisect
import hashlib
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from schemas.embedding import EmbeddingSpace
from schemas.generation import Parsed
from schemas.lineage import BBox, Chunk, ChunkSpan, ParsedDocument, ParsedPage, Revision
from schemas.settings import ChunkingSettings, EmbeddingSettings
from tasks.embedding import load_embedder
from tasks.ingest.parse.normalize import normalize_text
from tasks.progress import StageProgress
from tasks.task_wrapper import as_task

SEGMENTER_VERSION = "sentences-v1"
PAGE_JOINER = "\n\n"

# A sentence ends at . ! ? … (optionally closed by quotes/brackets) before whitespace, or at a
# paragraph break. OCR text has spurious periods; over-splitting only makes packing finer.
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"»”’)\]]*\s+|\n\s*\n")
_WORD = re.compile(r"\S+")

TokenCounter = Callable[[list[str]], list[int]]


@dataclass(frozen=True)
class ChunkSpec:
    target_tokens: int  # content tokens aimed for per chunk
    max_input_tokens: int  # the model's hard limit, specials and prefix included
    overhead_tokens: int  # specials and prefix the model adds to every input
    space_tag: str  # which tokenizer counted (part of the segmenter id)

    @property
    def content_limit(self) -> int:
        return min(self.target_tokens, self.max_input_tokens - self.overhead_tokens)

    @property
    def segmenter(self) -> str:
        return f"{SEGMENTER_VERSION}/t{self.content_limit}/{self.space_tag}"

    @property
    def segmenter_id(self) -> str:
        return hashlib.sha256(self.segmenter.encode()).hexdigest()[:8]


def chunk_spec(count_tokens: TokenCounter, target_tokens: int, max_input_tokens: int,
             space_tag: str) -> ChunkSpec:
    overhead = count_tokens([""])[0]
    if max_input_tokens - overhead < 16:
        raise ValueError(f"model limit {max_input_tokens} leaves no room for text")
    return ChunkSpec(target_tokens, max_input_tokens, overhead, space_tag)


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) offsets of sentences in text[start:end], whitespace trimmed."""
    end = len(text) if end is None else end
    spans, cursor = [], start
    for m in _SENTENCE_END.finditer(text, start, end):
        spans.append((cursor, m.start()))
        cursor = m.end()
    spans.append((cursor, end))
    return [t for s, e in spans if (t := _trim(text, s, e))]


def _trim(text: str, s: int, e: int) -> tuple[int, int] | None:
    """The span without surrounding whitespace; None when nothing is left."""
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return (s, e) if e > s else None


def _split_long(text: str, span: tuple[int, int], n_content: Callable[[list[str]], list[int]],
                limit: int) -> list[tuple[int, int]]:
    """Split an over-long sentence at word boundaries into pieces under the limit."""
    words = [(m.start() + span[0], m.end() + span[0]) for m in _WORD.finditer(text[span[0]:span[1]])]
    counts = n_content([text[s:e] for s, e in words])
    pieces, piece_start, used = [], None, 0
    for (s, e), n in zip(words, counts):
        if n > limit:  # a single "word" longer than the limit (OCR garbage): cut by characters
            if piece_start is not None:
                pieces.append((piece_start, prev_end))
                piece_start, used = None, 0
            step = max(1, (e - s) * limit // (n + 1))
            pieces.extend((i, min(i + step, e)) for i in range(s, e, step))
            continue
        if piece_start is not None and used + n > limit:
            pieces.append((piece_start, prev_end))
            piece_start, used = None, 0
        if piece_start is None:
            piece_start = s
        used += n
        prev_end = e
    if piece_start is not None:
        pieces.append((piece_start, prev_end))
    return pieces


def _halve(text: str, s: int, e: int) -> list[tuple[int, int]]:
    """Split a span at the word boundary nearest its middle (by characters if it has none).

    Used when exact counting finds a packed span over the limit (isolated word counts can
    under-estimate a tokenizer's count in context); halving always terminates.
    """
    mid = (s + e) // 2
    gaps = [m.start() + s for m in re.finditer(r"\s+", text[s:e])]
    cut = min(gaps, key=lambda g: abs(g - mid)) if gaps else mid
    if cut <= s or cut >= e:
        cut = mid
    return [t for a, b in ((s, cut), (cut, e)) if (t := _trim(text, a, b))]


def pack_sentences(text: str, sentences: Sequence[tuple[int, int]],
                   n_content: Callable[[list[str]], list[int]], limit: int) -> list[tuple[int, int]]:
    """Greedy packing of consecutive sentences into spans of at most `limit` content tokens."""
    counts = n_content([text[s:e] for s, e in sentences])
    units: list[tuple[int, int, int]] = []
    for (s, e), n in zip(sentences, counts):
        if n > limit:
            pieces = _split_long(text, (s, e), n_content, limit)
            units.extend((ps, pe, c) for (ps, pe), c in zip(pieces, n_content([text[a:b] for a, b in pieces])))
        else:
            units.append((s, e, n))
    spans, cur_start, cur_end, used = [], None, None, 0
    for s, e, n in units:
        # +1: joining two sentences can add a token at the seam
        if cur_start is not None and used + n + 1 > limit:
            spans.append((cur_start, cur_end))
            cur_start, used = None, 0
        if cur_start is None:
            cur_start, used = s, 0
        cur_end = e
        used += n + (1 if used else 0)
    if cur_start is not None:
        spans.append((cur_start, cur_end))
    return spans


def _union(boxes: list[BBox]) -> BBox | None:
    if not boxes:
        return None
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))


class _PageBoxes:
    """A page's boxed elements sorted by start, to find those a span overlaps without reading
    them all (a newspaper page has ≈ 5,000 elements and ≈ 50 chunks)."""

    def __init__(self, page: ParsedPage):
        boxed = [el for el in page.elements if el.bbox is not None]
        starts = [el.char_start for el in boxed]
        if any(a > b for a, b in zip(starts, starts[1:])):  # parsers write them in order; not all
            boxed.sort(key=lambda el: el.char_start)
            starts = [el.char_start for el in boxed]
        self.starts = starts
        self.ends = [el.char_end for el in boxed]
        self.boxes = [el.bbox for el in boxed]
        # the largest end up to each element: before the first one past `s`, none ends after `s`
        self.reach = list(itertools.accumulate(self.ends, max))

    def overlapping(self, s: int, e: int) -> list[BBox]:
        """Boxes of the elements with start < e and end > s (offsets into the page's text)."""
        first, stop = bisect.bisect_right(self.reach, s), bisect.bisect_left(self.starts, e)
        return [self.boxes[i] for i in range(first, stop) if self.ends[i] > s]


def chunk_document(doc: ParsedDocument, doc_id: str, spec: ChunkSpec,
                   count_tokens: TokenCounter) -> list[Chunk]:
    """Chunks of one parsed document; never crosses the document (or its access boundary).

    A document without text has no chunks (the parse stage quarantines one before it gets here).
    """
    overhead = spec.overhead_tokens

    def n_content(texts: list[str]) -> list[int]:
        return [n - overhead for n in count_tokens([normalize_text(t) for t in texts])]

    raw = PAGE_JOINER.join(p.raw_text for p in doc.pages)
    page_ranges, cursor = [], 0
    for page in doc.pages:
        page_ranges.append((page, cursor, cursor + len(page.raw_text)))
        cursor += len(page.raw_text) + len(PAGE_JOINER)

    # Sentences never straddle pages, so every span maps to pages cleanly.
    sentences = [s for _, a, b in page_ranges for s in sentence_spans(raw, a, b)]
    if not sentences:
        return []
    spans = pack_sentences(raw, sentences, n_content, spec.content_limit)

    # Verify with exact counts of what will be embedded; re-split anything still over the limit.
    # What is kept keeps its text and count: the chunk is that text, counted once.
    final: list[tuple[int, int, str, int]] = []
    queue = list(spans)
    while queue:
        batch, queue = queue, []
        texts = [normalize_text(raw[s:e]) for s, e in batch]
        for (s, e), text, n in zip(batch, texts, count_tokens(texts)):
            if n <= spec.max_input_tokens and n - overhead <= spec.content_limit + 8:
                final.append((s, e, text, n))
            else:
                queue.extend(_halve(raw, s, e))
    final.sort(key=lambda kept: kept[:2])

    boxes_of = [_PageBoxes(page) for page in doc.pages]
    chunks = []
    for ordinal, (s, e, text, n) in enumerate(final):
        spans_out = []
        for (page, a, b), page_boxes in zip(page_ranges, boxes_of):
            if s < b and e > a:
                boxes = page_boxes.overlapping(s - a, e - a)
                spans_out.append(ChunkSpan(page_no=page.page_no, bbox=_union(boxes)))
        chunks.append(Chunk(
            chunk_id=f"{doc.revision_id}-{spec.segmenter_id}-{ordinal:04d}",
            revision_id=doc.revision_id, doc_id=doc_id, ordinal=ordinal, text=text, n_tokens=n,
            char_start=s, char_end=e, page_start=spans_out[0].page_no if spans_out else 1,
            page_end=spans_out[-1].page_no if spans_out else 1, spans=spans_out,
            segmenter=spec.segmenter,
        ))
    return chunks


@dataclass(frozen=True)
class Chunked:
    chunks: list[Chunk]
    spec: ChunkSpec
    space: EmbeddingSpace  # of the model whose tokenizer counted


def chunk(parsed: Parsed, revisions: list[Revision], settings: ChunkingSettings,
          embedding: EmbeddingSettings) -> Chunked:
    """Chunks of every parsed revision, counted with the embedding model's own tokenizer."""
    embedder = load_embedder(embedding)  # only now: loading a model costs seconds
    space = embedder.space
    spec = chunk_spec(embedder.count_tokens, settings.target_tokens, space.max_input_tokens,
                      space.space_id[:8])
    chunks: list[Chunk] = []
    with StageProgress("chunk", len(revisions), "document") as progress:
        for rev in revisions:
            if rev.revision_id in parsed.documents:
                chunks.extend(chunk_document(parsed.documents[rev.revision_id], rev.doc_id, spec,
                                             embedder.count_tokens))
            progress.advance()
    return Chunked(chunks=chunks, spec=spec, space=space)


chunk_task = as_task(chunk, "chunk")
