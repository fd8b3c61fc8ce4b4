"""Scale-out benchmark (issue 10): the OCR path and embedding on the `local` and `dask` runners,
against raw single-threaded tesseract on the same pages, all in one run.

    flock -x /tmp/mabillon-cpu.lock .venv/bin/python bench/bench_scaleout.py \
        [--pages 60] [--docs 6] [--embed-records 160] [--skip-embed]

Inputs are generated from the bundled sample texts at 300 dpi: `--docs` scanned PDFs of
`--pages`/`--docs` pages each (so the parse stage splits them by page), and the same pages as
PNG files for the baseline. The baseline is the `tesseract` command on each PNG, one after
another, OMP_THREAD_LIMIT=1, nothing of ours around it. "OCR path" is the release's parse stage
(`run.stage_seconds["parse"]` of a real `release` into a fresh home): the PDF render, OCR,
word boxes, the parse tasks on the runner, the parser sandbox, the caches; each worker's sandbox
child is started just before (timed apart: "sandbox start", paid once per worker process, not per
page), and the Dask workers are a LocalCluster the release joins by address. Embedding is the release's embed stage
on chunks of the shared corpus's first records, measured after a warm-up batch (so a worker's
one model load is outside the figure), with 1 and 2 worker processes.
Results: JSON on stdout and bench/results/scaleout.json, a Markdown table on stderr.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import pickle
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import CORPUS, offline_env, save_report  # noqa: E402

offline_env()
# a loaded machine can take longer than Prefect's default to start its temporary API server
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
from prefect import flow  # noqa: E402

from flows.make_sample import image_bytes, render_scan, scanned_pdf, source_text  # noqa: E402
from flows.release import release  # noqa: E402
from flows.runner import RunnerShape, task_runner_for  # noqa: E402
from schemas.settings import DaskSettings, MabillonSettings, OcrSettings  # noqa: E402
from tasks.ingest.chunk import chunk_document, chunk_spec  # noqa: E402
from tasks.ingest.embed import embed  # noqa: E402
from tasks.ingest.parse.cer import character_error_rate  # noqa: E402
from tasks.ingest.parse.export_record import parse_record  # noqa: E402
from tasks.embedding import load_embedder  # noqa: E402
from tasks.store.layout import StoreLayout  # noqa: E402
from tasks.store.lineage_store import read_lineage_table  # noqa: E402
from tests.fixtures.make_samples import revision_for  # noqa: E402

TEXTS = ["registre-1793", "affiche-1848", "etat-civil-1854", "cahier-doleances-1789",
         "lettre-prefet-1871", "note-service-1952", "courrier-canton-1902"]
CONFIGS = [("local", 1), ("local", 2), ("dask", 1), ("dask", 2)]
PAGES_PER_TASK: int | None = None  # --pages-per-task; None: the setting's default
WARM_RELEASE: Path | None = None  # --warm-release: the folder released first on the same workers


def make_inputs(root: Path, pages: int, docs: int) -> tuple[Path, list[Path], list[str]]:
    texts = [source_text(TEXTS[i % len(TEXTS)]) for i in range(pages)]
    scans = [render_scan(t) for t in texts]
    pngs = []
    for i, image in enumerate(scans):
        png = root / "png" / f"page-{i:03d}.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        png.write_bytes(image_bytes(image, "PNG"))
        pngs.append(png)
    folder = root / "scans"
    folder.mkdir()
    per_doc = -(-pages // docs)
    for d in range(docs):
        part = scans[d * per_doc:(d + 1) * per_doc]
        if part:
            (folder / f"registre-{d:02d}.pdf").write_bytes(scanned_pdf(part))
    return folder, pngs, texts


def raw_tesseract(pngs: list[Path]) -> float:
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    start = time.perf_counter()
    for png in pngs:
        subprocess.run(["tesseract", str(png), "stdout", "-l", "fra"], check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def settings_of(home: Path, runner: str, workers: int, **extra) -> MabillonSettings:
    extra.setdefault("dask", DaskSettings(workers=workers, **({"pages_per_task": PAGES_PER_TASK} if PAGES_PER_TASK else {})))
    return MabillonSettings(home=home, runner=runner, ocr=OcrSettings(workers=workers), **extra)


def warm_sandbox(callers: int) -> float:
    """Start the parser sandbox's children of this process, one per concurrent caller (the
    parsers imported, as a long ingest has them): their start is paid once per worker, not per
    page, so it is timed apart from the parse stage. Returns the seconds it took."""
    from concurrent.futures import ThreadPoolExecutor

    from schemas.settings import MabillonSettings
    from tasks.ingest.sandbox import parse_untrusted
    from tests.fixtures.make_samples import revision_for

    data = "Le conseil municipal se réunit.".encode()
    start = time.perf_counter()
    with ThreadPoolExecutor(callers) as pool:  # concurrent: each caller takes a child of its own
        list(pool.map(lambda n: parse_untrusted(data, revision_for(f"warm-{n}.txt", data, "text/plain"),
                                                MabillonSettings().parsing), range(callers)))
    return time.perf_counter() - start


@contextlib.contextmanager
def warm_runner(runner: str, workers: int) -> Iterator[tuple[dict, float]]:
    """Settings overrides of a runner whose workers have their sandbox children started, and the
    seconds that took. `dask`: a LocalCluster the release joins by address (the same worker
    processes the release would start, each readying the parse stack as it starts:
    flows/dask_preload.py); `dask-bare`: the same without that preload (the runner before it)."""
    if runner == "local":
        yield {}, warm_sandbox(workers)
        return
    from distributed import Client, LocalCluster

    from flows.runner import local_cluster_options

    with LocalCluster(**local_cluster_options(DaskSettings(workers=workers), preload=runner != "dask-bare")) \
            as cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        # as a task on each worker's own thread (client.run would block the worker's event loop)
        warm = max(client.gather([client.submit(warm_sandbox, 1, workers=[w], allow_other_workers=False,
                                                pure=False) for w in client.scheduler_info()["workers"]]))
        yield {"dask": DaskSettings(workers=workers, address=cluster.scheduler_address,
                                     **({"pages_per_task": PAGES_PER_TASK} if PAGES_PER_TASK else {}))}, warm


def ocr_path(folder: Path, root: Path, runner: str, workers: int, texts: list[str], per_doc: int) -> dict:
    home = Path(tempfile.mkdtemp(prefix=f"home-{runner}-{workers}-", dir=root))  # a configuration may repeat
    with warm_runner(runner, workers) as (overrides, warm_s):
        settings = settings_of(home, "dask" if runner == "dask-bare" else runner, workers, **overrides)
        warm_release_s = None
        if WARM_RELEASE:  # a first release of other pages on the same workers, outside the figure
            start = time.perf_counter()
            release([str(WARM_RELEASE)], settings=settings.model_copy(update={"home": Path(f"{home}-warm")}))
            warm_release_s = time.perf_counter() - start
        result = release([str(folder)], settings=settings)
    pages = read_lineage_table(StoreLayout.from_settings(settings), result.generation, "pages").to_pylist()
    by_doc = {}
    for rev, group in itertools.groupby(sorted(pages, key=lambda p: (p["revision_id"], p["page_no"])),
                                        key=lambda p: p["revision_id"]):
        by_doc[rev] = [p["raw_text"] for p in group]
    cers = []  # each document's pages against the texts they were rendered from (docs in any order)
    for raw in by_doc.values():
        best = min(range(0, len(texts), per_doc),
                   key=lambda s: character_error_rate(texts[s], raw[0]))
        cers += [character_error_rate(t, r) for t, r in zip(texts[best:best + per_doc], raw)]
    return {"runner": runner, "workers": result.run.workers, "ocr_pages": result.run.ocr_pages,
            "bytes": storage(home), "sandbox_start_s": warm_s, "warm_release_s": warm_release_s,
            "parse_s": result.run.stage_seconds["parse"], "stage_seconds": result.run.stage_seconds,
            "mean_cer": statistics.mean(cers)}


def storage(home: Path) -> dict[str, int]:
    """Bytes on disk per kind of state after the release (for docs/capacity.md)."""
    def size(folder: Path) -> int:
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())

    out = {}
    for folder in [*sorted((home / "warehouse").iterdir()), home / "manifests"]:
        if folder.is_dir():
            out[folder.name] = size(folder)
    # the compiled query encoder is per embedding space and home (90 MB for MiniLM), not per page
    encoders = home / "warehouse" / "caches" / "encoders"
    if encoders.is_dir():
        out["encoders"] = size(encoders)
        out["caches"] -= out["encoders"]
    return out


def corpus_chunks(records: int):
    embedder = load_embedder(MabillonSettings().embedding)
    spec = chunk_spec(embedder.count_tokens, 200, embedder.space.max_input_tokens, embedder.space.space_id[:8])
    chunks = []
    with CORPUS.open(encoding="utf-8") as fh:
        for line in itertools.islice(fh, records):
            data = json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True).encode()
            rev = revision_for(f"{len(chunks)}.json", data)
            doc = parse_record(data, rev, MabillonSettings().parsing)
            chunks += chunk_document(doc, rev.doc_id, spec, embedder.count_tokens)
    return chunks, embedder.space.space_id, spec.segmenter_id


def embed_steps(chunks_file: str, root: str, settings: MabillonSettings, space_id: str, segmenter_id: str) -> dict:
    # the chunks come by file: a flow's parameters are limited to 512 KB on a Prefect server
    chunks = pickle.loads(Path(chunks_file).read_bytes())
    shape = RunnerShape.of_this_flow_run(settings)
    warm = StoreLayout.from_settings(settings.model_copy(update={"home": Path(root) / "warm"})).ensure()
    # one batch per worker first: each worker process loads the model once, outside the figure
    embed(chunks[:4 * shape.workers], warm, shape.embedding(settings), space_id, segmenter_id)
    layout = StoreLayout.from_settings(settings.model_copy(update={"home": Path(root) / "run"})).ensure()
    start = time.perf_counter()
    vectors = embed(chunks, layout, shape.embedding(settings), space_id, segmenter_id)
    seconds = time.perf_counter() - start
    return {"workers": shape.workers, "chunks": len(vectors), "seconds": seconds,
            "chunks_per_s": len(vectors) / seconds}


def embedding(chunks, space_id, segmenter_id, root: Path, runner: str, workers: int) -> dict:
    settings = settings_of(root / f"embed-{runner}-{workers}", runner, workers)
    run = flow(name="bench-embed", task_runner=task_runner_for(settings))(embed_steps)
    from flows.runner import api_for_workers

    chunks_file = root / "embed-chunks.pickle"
    chunks_file.write_bytes(pickle.dumps(chunks))
    with api_for_workers(settings):
        out = run(str(chunks_file), str(root / f"embed-{runner}-{workers}"), settings, space_id, segmenter_id)
    return {"runner": runner, **out}


def table(r: dict) -> str:
    base = r["raw_tesseract_pages_s"]
    lines = ["| path | workers | parse s | pages/s | vs raw tesseract | vs raw just before | mean CER | "
             "sandbox start (s, once per worker) | load average after |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
             f"| raw `tesseract`, one page after another, 1 thread | 1 | {r['raw_tesseract_s']:.1f} | {base:.2f} "
             "| 1.00 | | | | |"]
    for o in r["ocr"]:
        lines.append(f"| OCR path, `{o['runner']}` runner | {o['workers']} | {o['parse_s']:.1f} | {o['pages_s']:.2f} | "
                     f"{o['vs_raw']:.2f} | {o['vs_raw_just_before']:.2f} | {o['mean_cer']:.4f} | "
                     f"{o['sandbox_start_s']:.1f} | {o['load_average'][0]:.1f} |")
    for key in sorted(k for k in r if k.endswith("_all")):
        lines.append(f"\n{key.removesuffix('_all')}: median {r[key.removesuffix('_all')]:.2f} of "
                     + ", ".join(f"{x:.2f}" for x in r[key]))
    if r.get("embedding"):
        lines += ["", "| embedding | worker processes | chunks/s | vs 1 worker |", "|---|---:|---:|---:|"]
        one = next((e["chunks_per_s"] for e in r["embedding"] if e["runner"] == "dask" and e["workers"] == 1), None)
        for e in r["embedding"]:
            ratio = f"{e['chunks_per_s'] / one:.2f}" if one else ""
            lines.append(f"| `{e['runner']}` runner | {e['workers']} | {e['chunks_per_s']:.1f} | {ratio} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument("--docs", type=int, default=6)
    parser.add_argument("--embed-records", type=int, default=160)
    parser.add_argument("--skip-embed", action="store_true")
    parser.add_argument("--configs", default=",".join(f"{r}:{w}" for r, w in CONFIGS),
                        help="runner:workers pairs to measure, e.g. local:1,dask:1")
    parser.add_argument("--near-pages", type=int, default=14, help="pages of the baseline rerun before each configuration")
    parser.add_argument("--pages-per-task", type=int, default=None, help="Dask unit size (default: the setting's)")
    parser.add_argument("--warm-release", type=int, default=0, metavar="PAGES",
                        help="before each measured release, release PAGES other pages on the same workers "
                             "(a long-lived runner: worker imports and Prefect's first task outside the figure)")
    args = parser.parse_args()
    global PAGES_PER_TASK, WARM_RELEASE
    PAGES_PER_TASK = args.pages_per_task
    results: dict = {"cpus": os.cpu_count(), "load_average_before": os.getloadavg(),
                     "pages": args.pages, "docs": args.docs}
    with tempfile.TemporaryDirectory(prefix="bench-scaleout-") as tmp:
        root = Path(tmp)
        folder, pngs, texts = make_inputs(root, args.pages, args.docs)
        if args.warm_release:
            WARM_RELEASE, _, _ = make_inputs(root / "warm", args.warm_release, 1)
        raw_s = raw_tesseract(pngs)
        results["raw_tesseract_s"] = raw_s
        results["raw_tesseract_pages_s"] = args.pages / raw_s
        results["ocr"] = []
        configs = [(c.split(":")[0], int(c.split(":")[1])) for c in args.configs.split(",")]
        for runner, workers in configs:
            # a baseline just before each configuration too: on a shared machine the load moves
            near = pngs[:args.near_pages]
            near_rate = len(near) / raw_tesseract(near)
            o = ocr_path(folder, root, runner, workers, texts, -(-args.pages // args.docs))
            o["pages_s"] = args.pages / o["parse_s"]
            o["vs_raw"] = o["pages_s"] / results["raw_tesseract_pages_s"]
            o["raw_just_before_pages_s"] = near_rate
            o["vs_raw_just_before"] = o["pages_s"] / near_rate
            o["load_average"] = os.getloadavg()
            results["ocr"].append(o)
            print(f"{runner} {workers}: {o['pages_s']:.2f} pages/s ({o['vs_raw']:.2f}x raw)", file=sys.stderr)
        for n in (1, 2):  # the Dask runner against the local one, same worker count, same run
            for dask in ("dask", "dask-bare"):
                # each Dask run against the local run just before it, and the medians of those
                ratios, last_local = [], None
                for o in results["ocr"]:
                    if o["workers"] == n and o["runner"] == "local":
                        last_local = o["pages_s"]
                    elif o["workers"] == n and o["runner"] == dask and last_local:
                        ratios.append(o["pages_s"] / last_local)
                if ratios:
                    results[f"{dask}_{n}_vs_local_{n}"] = statistics.median(ratios)
                    results[f"{dask}_{n}_vs_local_{n}_all"] = ratios
        if not args.skip_embed and CORPUS.exists():
            chunks, space_id, segmenter_id = corpus_chunks(args.embed_records)
            results["embedding"] = [embedding(chunks, space_id, segmenter_id, root, runner, workers)
                                    for runner, workers in [("local", 1), ("dask", 1), ("dask", 2)]]
    results["load_average_after"] = os.getloadavg()
    save_report("scaleout", results)
    print(table(results), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
