"""Embedding at ingest (issue 33, item 7): the reference engine (sentence-transformers on torch)
against the ONNX graph the release compiles for queries, on the same chunks, in one run.

    flock -x /tmp/mabillon-cpu.lock .venv/bin/python bench/bench_embed_engines.py \
        [--records 160] [--repeats 5] [--threads 2] [--int8]

The chunks are the shared corpus's first `--records` records, parsed and chunked as a release
does (the model's tokenizer, 200-token target). Both engines embed every chunk through
`embed_documents`, batches of 32, with `--threads` intra-op threads, after one warm-up batch
each; the two engines alternate `--repeats` times (so a burst of load from another process falls
on both) and the figure is the median, with the spread. The same run measures how far the
compiled engine's vectors are from the reference's (largest |Δ| of a component, lowest cosine)
against the space contract's tolerance (tasks/compiled_encoder.py: MAX_ABS_DIFF, MIN_COSINE).
Results: JSON on stdout and bench/results/embed_engines.json, a Markdown table on stderr.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import CORPUS, offline_env, save_report  # noqa: E402

offline_env()

import numpy as np  # noqa: E402

from bench.bench_scaleout import corpus_chunks  # noqa: E402
from schemas.settings import EmbeddingSettings  # noqa: E402
from tasks.compiled_encoder import MAX_ABS_DIFF, MIN_COSINE, compile_query_encoder, _open_compiled  # noqa: E402
from tasks.embedding import limit_threads, load_embedder  # noqa: E402
from tasks.store.location import open_location  # noqa: E402


def timed(engine, texts: list[str]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    vectors = engine.embed_documents(texts)
    return time.perf_counter() - start, vectors


def int8_engine(folder, record, threads: int):
    """The compiled graph with its weights quantised to int8 (onnxruntime's dynamic quantisation:
    MatMul weights per channel, activations at run time), same tokenizer. Another space unless
    its vectors are within the contract, which the report says."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from tasks.compiled_encoder import OnnxQueryEncoder

    with tempfile.TemporaryDirectory(prefix="bench-int8-") as tmp:
        source, target = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        source.write_bytes((folder / record.model_file).read_bytes())
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True)
        graph = target.read_bytes()
    return OnnxQueryEncoder(record.space, graph, (folder / record.tokenizer_file).read_text(), threads)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--int8", action="store_true", help="also the compiled graph quantised to int8")
    args = parser.parse_args()
    if not CORPUS.exists():
        raise SystemExit(f"{CORPUS} is missing: the shared corpus is the input")
    chunks, space_id, _ = corpus_chunks(args.records)
    texts = [c.text for c in chunks]
    limit_threads(args.threads)
    reference = load_embedder(EmbeddingSettings(threads=args.threads))
    with tempfile.TemporaryDirectory(prefix="bench-embed-") as tmp:
        encoders = open_location(tmp)
        record = compile_query_encoder(reference, encoders / space_id)
        if record is None:
            raise SystemExit("the compiled encoder did not pass its own verification")
        compiled = _open_compiled(encoders, space_id, args.threads)
        engines = {"reference": reference, "compiled": compiled}
        if args.int8:
            engines["compiled-int8"] = int8_engine(encoders / space_id, record, args.threads)
        for engine in engines.values():  # warm-up: first-call allocations outside the figure
            engine.embed_documents(texts[:32])
        seconds: dict[str, list[float]] = {name: [] for name in engines}
        vectors: dict[str, np.ndarray] = {}
        for _ in range(args.repeats):
            for name, engine in engines.items():
                s, vectors[name] = timed(engine, texts)
                seconds[name].append(s)
                print(f"{name}: {len(texts) / s:.1f} chunks/s", file=sys.stderr)
    diff = float(np.abs(vectors["reference"] - vectors["compiled"]).max())
    cosine = float((vectors["reference"] * vectors["compiled"]).sum(1).min())
    rates = {name: sorted(len(texts) / s for s in secs) for name, secs in seconds.items()}
    # each engine against the reference, pass by pass (the passes alternate: the same load)
    paired = {name: statistics.median(r / c for r, c in zip(seconds["reference"], secs))
              for name, secs in seconds.items()}
    deviation = {name: {"max_abs_diff": float(np.abs(vectors["reference"] - v).max()),
                        "min_cosine": float((vectors["reference"] * v).sum(1).min())}
                 for name, v in vectors.items() if name != "reference"}
    for d in deviation.values():
        d["within_contract"] = d["max_abs_diff"] <= MAX_ABS_DIFF and d["min_cosine"] >= MIN_COSINE
    report = {
        "cpus": os.cpu_count(), "threads": args.threads, "chunks": len(texts),
        "tokens_mean": statistics.mean(reference.count_tokens(texts)), "space_id": space_id,
        "chunks_per_s": {n: statistics.median(r) for n, r in rates.items()},
        "chunks_per_s_all": rates,
        "ratio_compiled_vs_reference": statistics.median(rates["compiled"]) / statistics.median(rates["reference"]),
        "max_abs_diff": diff, "min_cosine": cosine,
        "within_contract": diff <= MAX_ABS_DIFF and cosine >= MIN_COSINE,
        "vs_reference_paired": paired, "deviation": deviation,
        "contract": {"max_abs_diff": MAX_ABS_DIFF, "min_cosine": MIN_COSINE},
        "load_average_after": os.getloadavg(),
    }
    save_report("embed_engines", report)
    print(f"| engine | chunks/s (median of {args.repeats}) | min–max | vs reference (paired) | max abs diff "
          "| min cosine | within the contract |\n|---|---:|---:|---:|---:|---:|---|", file=sys.stderr)
    for name in engines:
        r, d = rates[name], deviation.get(name, {"max_abs_diff": 0.0, "min_cosine": 1.0, "within_contract": True})
        print(f"| {name} | {statistics.median(r):.1f} | {r[0]:.1f}–{r[-1]:.1f} | {paired[name]:.2f} | "
              f"{d['max_abs_diff']:.1e} | {d['min_cosine']:.7f} | {'yes' if d['within_contract'] else 'no'} |",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
