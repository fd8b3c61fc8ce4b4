"""A tiny generation built in a temp dir: real LanceDB table, toy embedder, two tenants."""
from __future__ import annotations

import hashlib
import json

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from schemas.lineage import chunk_table_schema
from schemas.retrieval import Principal, RetrievalSettings
from tasks.query.retriever import Retriever
from tasks.query.view import GenerationView

DIM = 64

# (doc_id, corpus, date, tenant, groups, [chunk texts])
DOCS = [
    ("jo-1", "journal_officiel", "1887-01-11", "t1", ["public"],
     ["M. Pierre Blanc, doyen d'âge, monte au fauteuil.", "La séance est ouverte à deux heures."]),
    ("jo-2", "journal_officiel", "1887-01-13", "t1", ["public"],
     ["M. Floquet est élu président de la Chambre des députés.",
      "Les obsèques de M. Paul Bert auront lieu samedi."]),
    ("gau-1", "le_gaulois", "1887-01-14", "t1", ["public"],
     ["Le Gaulois raconte l'élection de M. Floquet à la présidence."]),
    ("int-1", "l_intransigeant", "1887-01-13", "t1", ["public"],
     ["L'Intransigeant se moque du doyen d'âge Pierre Blanc et de ses votes tonkinois."]),
    ("secret-1", "journal_officiel", "1887-01-12", "t1", ["comite-secret"],
     ["Comité secret: Floquet Floquet Floquet président budget."]),
    ("other-1", "le_gaulois", "1887-01-13", "t2", ["public"],
     ["Floquet président, article d'un autre locataire."]),
    ("nogroup-1", "le_gaulois", "1887-01-13", "t1", [],
     ["Floquet sans groupe d'accès."]),
    ("undated-1", "le_gaulois", None, "t1", ["public"],
     ["Chronique sans date sur le budget de la guerre."]),
]


def toy_vector(text: str) -> np.ndarray:
    """Hashed bag of folded words, unit norm: similar wording → similar vectors."""
    from tasks.index.analyzer import analyze

    v = np.zeros(DIM, dtype=np.float32)
    for t in analyze(text):
        v[int(hashlib.md5(t.encode()).hexdigest(), 16) % DIM] += 1.0
    n = np.linalg.norm(v)
    return v / n if n else v + 1.0 / np.sqrt(DIM)


def chunk_table() -> pa.Table:
    rows = []
    for doc_id, corpus, date, tenant, groups, texts in DOCS:
        offset = 0
        for i, text in enumerate(texts):
            rows.append({
                "chunk_id": f"{doc_id}#{i}", "revision_id": f"r-{doc_id}", "source_id": f"s-{doc_id}",
                "doc_id": doc_id, "corpus": corpus, "date": date, "tenant": tenant,
                "groups": groups, "ordinal": i, "text": text, "n_tokens": len(text.split()),
                "char_start": offset, "char_end": offset + len(text), "page_start": 1,
                "page_end": 1, "spans_json": json.dumps([]), "segmenter": "toy",
                "vector": toy_vector(text).tolist(),
            })
            offset += len(text) + 2
    return pa.Table.from_pylist(rows, schema=chunk_table_schema(DIM))


@pytest.fixture(scope="session")
def toy_table() -> pa.Table:
    return chunk_table()


@pytest.fixture()
def lance_table(tmp_path, toy_table):
    db = lancedb.connect(str(tmp_path / "lance"))
    return db.create_table("chunks", toy_table, mode="overwrite")


PUBLIC = Principal(principal_id="reader", tenant="t1", groups=["public"])


def make_retriever(lance_table, toy_table, principal=PUBLIC, excluded=(), index_dir=None,
                   **params) -> Retriever:
    return Retriever(
        generation="g0001", space_id="toy", view=GenerationView.from_lance(lance_table),
        lance_table=lance_table,
        embed_queries=lambda qs: np.stack([toy_vector(q) for q in qs]), principal=principal,
        retrieval=RetrievalSettings(**params), index_dir=index_dir, excluded_doc_ids=excluded)
