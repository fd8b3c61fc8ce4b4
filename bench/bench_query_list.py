"""The reading room's question list: every record parsed per request (before issue 32) against
the in-memory index (tasks/store/query_records.QueryIndex), on N records written here.

    .venv/bin/python bench/bench_query_list.py --records 3000 --requests 20
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tasks.query.record import write_record  # noqa: E402
from tasks.store.layout import StoreLayout  # noqa: E402
from tasks.store.query_records import QueryIndex, iter_query_records  # noqa: E402
from tests.store.test_query_records import record  # noqa: E402  (one valid record, as the test writes it)


def timed(fn, requests: int) -> list[float]:
    out = []
    for _ in range(requests):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        layout = StoreLayout(Path(tmp) / "warehouse", Path(tmp) / "manifests")
        for n in range(args.records):
            write_record(layout, record(f"20261205T{n // 3600:02d}{n // 60 % 60:02d}{n % 60:02d}-aaaaaaaa-{n:016x}"))
        reread = timed(lambda: list(iter_query_records(layout)), args.requests)
        index = QueryIndex(layout)
        index.FRESH_NS = 0  # nothing is written during the measure
        first = timed(index.listings, 1)[0]
        indexed = timed(index.listings, args.requests)
        print(json.dumps({"records": args.records, "requests": args.requests,
                          "reread_median_s": statistics.median(reread),
                          "index_first_listing_s": first,
                          "index_median_s": statistics.median(indexed),
                          "ratio": statistics.median(reread) / statistics.median(indexed)}, indent=2))


if __name__ == "__main__":
    main()
