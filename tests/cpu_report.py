"""Per-test CPU accounting (issue 31): where the suite's CPU goes, not only its wall time.

The suite is CPU-bound on two cores, so a test's wall time under xdist says more about what ran
beside it than about itself. With `MABILLON_TEST_CPU_REPORT=<dir>`, each process writes one JSON
line per test phase: the CPU seconds of this process and of the children it reaped during the
phase (CLI subprocesses, and the servers they stopped). Servers a session fixture keeps are
reaped at the session's end and counted there. `python -m tests.cpu_report <dir>` sums them."""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

REPORT_DIR = os.environ.get("MABILLON_TEST_CPU_REPORT")


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pytest_configure(config) -> None:
    if REPORT_DIR:  # the folder may not exist yet
        Path(REPORT_DIR).mkdir(parents=True, exist_ok=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not REPORT_DIR:
        yield
        return
    start, began = _cpu(), time.time()
    yield
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(REPORT_DIR) / f"cpu-{worker}.jsonl", "a", encoding="utf-8") as out:
        # wall-clock start and end too: which worker ran what when, and how long one ran alone
        out.write(json.dumps({"test": item.nodeid.split("@")[0], "cpu_s": round(_cpu() - start, 2),
                              "start": round(began, 1), "end": round(time.time(), 1)}) + "\n")


def summarise(folder: Path, top: int = 40) -> str:
    per_test, per_module = {}, defaultdict(float)
    for path in folder.glob("cpu-*.jsonl"):
        for line in path.read_text("utf-8").splitlines():
            row = json.loads(line)
            per_test[row["test"]] = row["cpu_s"]
            per_module[row["test"].split("::")[0]] += row["cpu_s"]
    lines = [f"total {sum(per_test.values()):.0f} CPU-s over {len(per_test)} tests", "", "modules:"]
    lines += [f"{s:8.1f}  {m}" for m, s in sorted(per_module.items(), key=lambda kv: -kv[1])[:top]]
    lines += ["", "tests:"]
    lines += [f"{s:8.1f}  {t}" for t, s in sorted(per_test.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarise(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40))
