"""Rebuild a published generation's lexical index in place: the operator's command
(`mabillon reindex GENERATION`). The query side never writes into a generation; where the index
is missing or unreadable it serves from a scratch index of its own process (flagged) until this
has run.
"""
from __future__ import annotations

import logging

from schemas.indexes import LexicalIndex
from schemas.retrieval import RetrievalSettings
from tasks.index.generation_indexes import LEXICAL_COLUMNS
from tasks.index.lexical_build import build_lexical
from tasks.store.atomic import release_lock
from tasks.store.lance_store import open_generation_table
from tasks.store.layout import StoreLayout
from tasks.store.manifests import read_manifest

log = logging.getLogger(__name__)


def reindex_lexical(layout: StoreLayout, generation: str, retrieval: RetrievalSettings) -> LexicalIndex:
    """The lexical index of `generation` for the configured analysis (the one its queries open),
    built again from the texts of its tagged version, in that version's row order. Holds the
    release slot, so no purge rewrites the version meanwhile; KeyError for an unknown generation."""
    read_manifest(layout, generation)
    with release_lock(layout.lock):
        chunks = open_generation_table(layout, generation).to_lance().to_table(columns=LEXICAL_COLUMNS)
        built = build_lexical(layout.index_dir(generation), chunks, retrieval.stem, retrieval.char_ngrams)
    log.info("generation %s: lexical index %s rebuilt (%d rows)", generation, built.path, built.rows)
    return built
