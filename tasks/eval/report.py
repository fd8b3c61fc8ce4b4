"""Evaluation reports: one folder holds every system's summary and rows; the markdown
summary, the plots and the HTML page are rebuilt from all the summaries present, so systems
evaluated one command at a time end up side by side."""
from __future__ import annotations

import html
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.eval.metrics import MISS_KINDS
from tasks.markup import md_code, md_row

log = logging.getLogger(__name__)
HEADLINE = ("mrr_first", "mrr_multi", "p_acc", "r_acc", "accepted_mean")


def write_run(folder: Path, summary: dict[str, Any], rows: pa.Table) -> dict[str, Path]:
    """Store one system's results, then rebuild the folder's report."""
    folder.mkdir(parents=True, exist_ok=True)
    system = summary["system"]
    (folder / f"summary-{system}.json").write_text(json.dumps(summary, indent=2), "utf-8")
    pq.write_table(rows, folder / f"rows-{system}.parquet")
    return build_report(folder)


def load_summaries(folder: Path) -> list[dict[str, Any]]:
    order = {"bm25": 0, "dense": 1, "hybrid": 2, "trace": 3}
    out = [json.loads(p.read_text("utf-8")) for p in folder.glob("summary-*.json")]
    return sorted(out, key=lambda s: (order.get(s["system"], 9), s["system"]))


def _fmt(v: Any) -> str:
    return "–" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def markdown_summary(summaries: list[dict[str, Any]]) -> str:
    if not summaries:
        return "No evaluation results yet.\n"
    ks = summaries[0]["ks"]
    cols = [f"recall@{k}" for k in ks] + list(HEADLINE)
    lines = [f"Generation {md_code(summaries[0]['generation'])}, {summaries[0]['n']} questions.", "",
             "| system | " + " | ".join(cols) + " | framework s/q | errors |",
             "|---|" + "---|" * (len(cols) + 2)]
    for s in summaries:
        lines.append(md_row([s["system"], *(_fmt(s["overall"].get(c)) for c in cols),
                             f"{s['cost']['framework_s_per_question']:.3f}", s["errors"]]))
    kmax = f"recall@{max(ks)}"
    types = sorted({t for s in summaries for t in s["by_type"]})
    lines += ["", f"{kmax} by question type:", "",
              md_row(["system", *(f"{t} (n={summaries[0]['by_type'].get(t, {}).get('n', '?')})"
                                  for t in types)]),
              "|---|" + "---|" * len(types)]
    for s in summaries:
        lines.append(md_row([s["system"], *(_fmt(s["by_type"].get(t, {}).get(kmax)) for t in types)]))
    traced = [s for s in summaries if s.get("misses")]
    if traced:
        lines += ["", "Where gold documents outside the top k were lost:", "",
                  "| system | " + " | ".join(MISS_KINDS) + " |", "|---|" + "---|" * len(MISS_KINDS)]
        for s in traced:
            lines.append(md_row([s["system"], *(s["misses"][m] for m in MISS_KINDS)]))
    return "\n".join(lines) + "\n"


def plot_recall_curves(summaries: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    types = ["overall"] + sorted({t for s in summaries for t in s["by_type"]})
    fig, axes = plt.subplots(1, len(types), figsize=(3.2 * len(types), 3.2), sharey=True)
    for ax, t in zip(axes if len(types) > 1 else [axes], types):
        for s in summaries:
            m = s["overall"] if t == "overall" else s["by_type"].get(t, {})
            ax.plot(s["ks"], [m.get(f"recall@{k}") or 0.0 for k in s["ks"]], marker="o",
                    label=s["system"])
        ax.set_title(t, fontsize=9)
        ax.set_xlabel("k")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    (axes[0] if len(types) > 1 else axes).set_ylabel("recall@k")
    (axes[0] if len(types) > 1 else axes).legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_misses(summaries: list[dict[str, Any]], path: Path) -> bool:
    traced = [s for s in summaries if s.get("misses")]
    if not traced:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    width = 0.8 / len(traced)
    for i, s in enumerate(traced):
        ax.bar([j + i * width for j in range(len(MISS_KINDS))],
               [s["misses"][m] for m in MISS_KINDS], width=width, label=s["system"])
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(MISS_KINDS))])
    ax.set_xticklabels([m.replace("_", " ") for m in MISS_KINDS], fontsize=8)
    ax.set_ylabel("missed gold documents")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def build_report(folder: Path) -> dict[str, Path]:
    summaries = load_summaries(folder)
    md = markdown_summary(summaries)
    paths = {"markdown": folder / "summary.md", "html": folder / "report.html",
             "recall_plot": folder / "recall_at_k.png"}
    paths["markdown"].write_text(md, "utf-8")
    imgs = []
    if importlib.util.find_spec("matplotlib") is None:  # the `eval` extra (pyproject.toml)
        log.warning("report without plots: matplotlib is not installed (pip install 'mabillon[eval]')")
        del paths["recall_plot"]
    else:
        plot_recall_curves(summaries, paths["recall_plot"])
        imgs.append('<img src="recall_at_k.png" alt="recall@k per system and question type">')
        if plot_misses(summaries, folder / "misses.png"):
            paths["miss_plot"] = folder / "misses.png"
            imgs.append('<img src="misses.png" alt="where missed gold documents were lost">')
    paths["html"].write_text(
        "<!doctype html><meta charset='utf-8'><title>Mabillon evaluation</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "pre{background:#f6f6f6;padding:1em;overflow:auto}</style>"
        "<h1>Retrieval evaluation</h1>" + "".join(f"<p>{i}</p>" for i in imgs)
        + f"<h2>Summary</h2><pre>{html.escape(md)}</pre>"
        + "<p>Per-question rows: " + ", ".join(
            f"<a href='rows-{s['system']}.parquet'>rows-{s['system']}.parquet</a>"
            for s in summaries) + "</p>", "utf-8")
    return paths
