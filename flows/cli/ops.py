"""CLI commands of operations: promote, rollback, diff, delete, gc, pin."""
from __future__ import annotations

import argparse

from flows.cli.main import emit
from schemas.settings import MabillonSettings
from tasks.store.layout import StoreLayout


def register(sub, common) -> None:
    p = sub.add_parser("promote", parents=[common], help="serve a generation (atomic switch)")
    p.add_argument("generation")
    p.add_argument("--reason", default="")
    p.set_defaults(func=cmd_promote)

    p = sub.add_parser("rollback", parents=[common], help="serve the previously serving generation again")
    p.add_argument("--to", help="generation to return to")
    p.add_argument("--reason", default="")
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser("canary", parents=[common], help="serve a candidate generation to named groups "
                                                        "only (ended by promote, rollback or --stop)")
    p.add_argument("generation", nargs="?", help="the candidate (with --stop: whose canary ends; default all)")
    p.add_argument("--groups", default="", help="comma-separated groups of principals routed to the candidate")
    p.add_argument("--reason", default="")
    p.add_argument("--stop", action="store_true", help="end the canary instead of starting one")
    p.set_defaults(func=cmd_canary)

    p = sub.add_parser("diff", parents=[common], help="sources, counts, model and parsers between two generations")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("shadow", parents=[common], help="compare a staged generation with the serving one on questions")
    p.add_argument("generation")
    p.add_argument("questions", help="JSONL: question, optional question_id and gold_ids")
    p.add_argument("--system", default="hybrid", choices=["bm25", "dense", "hybrid"])
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--principal")
    p.set_defaults(func=cmd_shadow)

    p = sub.add_parser("delete", parents=[common], help="delete documents from every answer and every copy")
    p.add_argument("doc_ids", nargs="+")
    p.add_argument("--reason", default="")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("gc", parents=[common], help="retire old generations and remove them physically")
    p.set_defaults(func=cmd_gc)

    p = sub.add_parser("pin", parents=[common], help="keep a generation through garbage collection")
    p.add_argument("generation")
    p.add_argument("--unpin", action="store_true")
    p.set_defaults(func=cmd_pin)


def _routing_text(r) -> str:
    last = r.history[-1]
    return (f"serving {r.serving} ({last.action} by {last.actor}, from {last.from_generation})"
            + (f": {last.reason}" if last.reason else ""))


def cmd_promote(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.operate import PromoteParams, promote

    routing = promote(PromoteParams(generation=args.generation, reason=args.reason), settings=settings)
    emit(args, routing.model_dump(mode="json"), _routing_text(routing))
    return 0


def cmd_rollback(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.operate import RollbackParams, rollback

    routing = rollback(RollbackParams(to=args.to, reason=args.reason), settings=settings)
    emit(args, routing.model_dump(mode="json"), _routing_text(routing))
    return 0


def cmd_canary(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.operate import CanaryParams, canary

    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    routing = canary(CanaryParams(generation=args.generation, groups=groups, reason=args.reason,
                                  stop=args.stop), settings=settings)
    lines = [f"serving {routing.serving} to everyone else"]
    lines += [f"canary {c.generation} → groups {', '.join(c.groups)} (since {c.since:%Y-%m-%d %H:%M:%S})"
              for c in routing.canaries] or ["no canary"]
    emit(args, routing.model_dump(mode="json"), "\n".join(lines))
    return 0


def cmd_diff(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from tasks.ops.diff import diff_generations

    d = diff_generations(StoreLayout.from_settings(settings), args.a, args.b)
    s = d.sources
    lines = [f"{d.a} → {d.b}",
             f"sources: +{len(s.added)} added, ~{len(s.changed)} changed, -{len(s.removed)} removed, "
             f"{len(s.unchanged)} unchanged",
             *(f"  + {x}" for x in s.added[:20]), *(f"  ~ {x}" for x in s.changed[:20]),
             *(f"  - {x}" for x in s.removed[:20]),
             f"chunks: {d.chunks[d.a]} → {d.chunks[d.b]}; vectors: {d.vectors[d.a]} → {d.vectors[d.b]}",
             f"model: {d.model[d.a]} → {d.model[d.b]} (space {d.space_id[d.a]} → {d.space_id[d.b]})",
             f"parsers: {d.parsers[d.a]} → {d.parsers[d.b]}"]
    emit(args, d.model_dump(mode="json"), "\n".join(lines))
    return 0


def cmd_shadow(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from pathlib import Path

    from tasks.ops.shadow import load_shadow_questions, shadow_compare
    from tasks.query.principals import resolve_principal

    principal = resolve_principal(settings, args.principal)
    r = shadow_compare(settings, principal, args.generation, load_shadow_questions(Path(args.questions)),
                       system=args.system, k=args.k)

    def fmt(v):
        return "n/a" if v is None else f"{v:.3f}"

    lines = [f"shadow {r.staged} (staged) vs {r.serving} (serving), {r.system}, {r.n} questions, k={r.k}",
             f"recall@{r.k}: {fmt(r.recall_staged)} vs {fmt(r.recall_serving)}",
             f"mean top-{r.k} overlap: {r.mean_overlap:.2f}",
             *(f"  {t.question_type}: {t.n} questions, recall@{r.k} {fmt(t.recall_staged)} vs "
               f"{fmt(t.recall_serving)}, overlap {t.mean_overlap:.2f}" for t in r.by_type),
             f"latency median {r.latency_staged_median_s * 1000:.1f} ms vs {r.latency_serving_median_s * 1000:.1f} ms; "
             f"p95 {r.latency_staged_p95_s * 1000:.1f} ms vs {r.latency_serving_p95_s * 1000:.1f} ms"]
    emit(args, r.model_dump(mode="json"), "\n".join(lines))
    return 0


def cmd_delete(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.operate import DeleteParams, delete

    r = delete(DeleteParams(doc_ids=args.doc_ids, reason=args.reason), settings=settings)
    lines = [f"deleted {', '.join(r.doc_ids)}",
             f"gone from answers after {r.masked_after_s * 1000:.1f} ms (tombstone)"]
    if r.unknown:
        lines.append(f"not in the serving generation (tombstoned anyway): {', '.join(r.unknown)}")
    if r.published_after_s is not None:
        lines.append(f"generation {r.generation} without them serving after {r.published_after_s:.2f} s")
    lines.append(f"gone from disk after {r.purged_after_s:.2f} s" if r.purged_after_s is not None
                 else "physical removal after the retention window (`mabillon gc`)")
    emit(args, r.model_dump(mode="json"), "\n".join(lines))
    return 0


def cmd_gc(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.operate import gc

    r = gc(settings=settings)
    lines = [f"kept {', '.join(r.kept) or '-'}; retired {', '.join(r.retired) or '-'}",
             f"removed {r.cache_files_removed} cache files, {r.blobs_removed} blobs; lance {r.lance}"]
    if r.purge:
        lines.append(f"purged {', '.join(r.purge.doc_ids)} from {', '.join(r.purge.generations_rewritten)}")
    emit(args, r.model_dump(mode="json"), "\n".join(lines))
    return 0


def cmd_pin(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.operate import pin

    r = pin(StoreLayout.from_settings(settings), args.generation, pinned=not args.unpin)
    emit(args, r.model_dump(mode="json"), f"pinned: {', '.join(r.pinned) or '-'}")
    return 0
