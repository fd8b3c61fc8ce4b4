"""Operations benchmarks (issue 6): time from `delete` to gone-from-answers and to gone-from-disk,
and the cost of a promotion/rollback switch, on the full shared corpus.

    .venv/bin/python bench/bench_ops.py [--home DIR_WITH_PUBLISHED_CORPUS] [--repeats 5]

With --home the state is copied (the original is untouched); without it the corpus is ingested
into a temporary home first. Results: JSON on stdout and bench/results/ops.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import CORPUS, corpus_home, offline_env, save_report  # noqa: E402

offline_env()


def on_disk(home: Path, needle: str) -> bool:
    data = needle.encode("utf-8")
    return any(data in p.read_bytes() for p in home.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()

    from flows.operate import DeleteParams, PromoteParams, RollbackParams, delete, promote, rollback
    from flows.release import ReleaseOptions, release
    from schemas.retrieval import Principal
    from schemas.settings import MabillonSettings
    from tasks.query.retriever import Retriever

    home = corpus_home(Path(tempfile.mkdtemp(prefix="bench-ops-")) / "home", a.home)
    settings = MabillonSettings(home=home)
    public = Principal(principal_id="default", tenant="default", groups=["public"])
    records = [json.loads(line) for line in CORPUS.open(encoding="utf-8")]
    by_id = {r["doc_id"]: r for r in records}

    # a staged twin of the serving generation, to time switches without changing answers
    tmp_export = home.parent / "one.jsonl"
    first = dict(records[0])
    first["text"] += " (note de l'archiviste)"
    tmp_export.write_text(json.dumps(first, ensure_ascii=False) + "\n", "utf-8")
    release(paths=[str(tmp_export)], options=ReleaseOptions(promote=False), settings=settings)
    staged = "g0002"
    switches = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        promote(PromoteParams(generation=staged, reason="bench"), settings=settings)
        switches.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rollback(RollbackParams(reason="bench"), settings=settings)
        switches.append(time.perf_counter() - t0)

    deletions = []
    victims = [r["doc_id"] for r in records if not r["doc_id"].endswith(tuple("0123456789"))][:a.repeats] \
        or [r["doc_id"] for r in records[1:a.repeats + 1]]
    for doc_id in victims:
        text = " ".join(by_id[doc_id]["text"].split())[100:160]
        t0 = time.perf_counter()
        result = delete(DeleteParams(doc_ids=[doc_id], reason="bench"), settings=settings)
        answered = Retriever.open(settings, public)
        gone = doc_id not in {h.doc_id for h in answered.substring_chunks(text[:40], 50)}
        answer_check = time.perf_counter() - t0
        deletions.append({"doc_id": doc_id, "masked_s": result.masked_after_s,
                          "gone_from_answers_checked_s": answer_check if gone else None,
                          "published_s": result.published_after_s, "purged_s": result.purged_after_s,
                          "text_left_on_disk": on_disk(home, text)})

    def med(key):
        vals = [d[key] for d in deletions if d[key] is not None]
        return statistics.median(vals) if vals else None

    report = {
        "switch_s_median": statistics.median(switches),
        "delete": {"n": len(deletions), "masked_s_median": med("masked_s"),
                   "published_s_median": med("published_s"), "purged_s_median": med("purged_s"),
                   "any_text_left_on_disk": any(d["text_left_on_disk"] for d in deletions),
                   "runs": deletions},
    }
    report["delete"]["purged_over_masked"] = report["delete"]["purged_s_median"] / report["delete"]["masked_s_median"]
    save_report("ops", report)


if __name__ == "__main__":
    main()
