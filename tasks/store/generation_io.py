"""Read a published generation back: its lineage tables and its vectors, by chunk id."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from schemas.generation import GenerationManifest
from tasks.store.lance_store import open_generation_table
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import LINEAGE_TABLES, read_lineage_table
from tasks.store.manifests import read_manifest


def read_generation(layout: StoreLayout, generation: str) -> tuple[GenerationManifest, dict[str, pa.Table], np.ndarray]:
    """Manifest, lineage tables (in today's shape, whatever version wrote them), and vectors
    row-aligned with the lineage chunks table."""
    manifest = read_manifest(layout, generation)
    tables = {name: read_lineage_table(layout, generation, name) for name in LINEAGE_TABLES}
    served = open_generation_table(layout, generation).to_arrow().select(["chunk_id", "vector"])
    dim = manifest.embedding_space.dim
    flat = served["vector"].combine_chunks().values.to_numpy(zero_copy_only=False)
    by_id = dict(zip(served["chunk_id"].to_pylist(), flat.reshape(-1, dim)))
    ids = tables["chunks"]["chunk_id"].to_pylist()
    vectors = np.stack([by_id[i] for i in ids]).astype(np.float32) if ids else np.zeros((0, dim), np.float32)
    return manifest, tables, vectors
