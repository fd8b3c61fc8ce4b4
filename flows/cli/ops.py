"""CLI commands of operations: promote, rollback, canary, diff, shadow, delete, gc, pin, reindex.

`diff` reads the state files directly and `reindex` rebuilds one index in place (no Prefect). The others that change state run their flow,
reporting to the Prefect server of a running `mabillon serve` when there is one.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable

from flows.cli.errors import CliError, Exit
from flows.cli.main import add_command, emit
from schemas.settings import MabillonSettings


def _layout(settings: MabillonSettings):
    from tasks.store.layout import StoreLayout

    return StoreLayout.from_settings(settings)


def _routing(settings: MabillonSettings):
    from tasks.store.routing import read_routing

    return read_routing(_layout(settings))


def register(sub, common) -> None:
    p = add_command(sub, common, "promote", "serve a generation (one atomic switch)",
                    'mabillon promote g0003 --reason "new intake"')
    p.add_argument("generation")
    p.add_argument("--reason", default="", help="recorded in the routing history")
    p.set_defaults(func=cmd_promote)

    p = add_command(sub, common, "rollback", "serve the previously serving generation again",
                    'mabillon rollback --reason "bad OCR in g0004"')
    p.add_argument("--to", help="generation to return to (default: the one that served before)")
    p.add_argument("--reason", default="", help="recorded in the routing history")
    p.set_defaults(func=cmd_rollback)

    p = add_command(sub, common, "canary", "serve a candidate generation to named groups only "
                    "(ended by promote, rollback or --stop)", "mabillon canary g0004 --groups staff")
    p.add_argument("generation", nargs="?", help="the candidate (with --stop: whose canary ends; default all)")
    p.add_argument("--groups", default="", help="comma-separated groups of principals routed to the candidate")
    p.add_argument("--reason", default="", help="recorded in the routing history and the release record")
    p.add_argument("--stop", action="store_true", help="end the canary instead of starting one")
    p.set_defaults(func=cmd_canary)

    p = add_command(sub, common, "diff", "what changed between two generations: sources, counts, "
                    "model, parsers", "mabillon diff g0002 g0003")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(func=cmd_diff)

    p = add_command(sub, common, "shadow", "compare a staged generation with the serving one on "
                    "a question set", "mabillon shadow g0003 questions.jsonl --k 10")
    p.add_argument("generation")
    p.add_argument("questions", help="JSONL: question, optional question_id and gold_ids")
    p.add_argument("--system", default="hybrid", choices=["bm25", "dense", "hybrid"])
    p.add_argument("--k", type=int, default=10, help="cut-off of recall and overlap")
    p.add_argument("--principal", help="a name in principals.json (default: the default principal)")
    p.set_defaults(func=cmd_shadow)

    p = add_command(sub, common, "delete", "delete documents from every answer at once and from "
                    "every copy on disk", 'mabillon delete jo-1887-03-02 --reason "rights request"')
    p.add_argument("doc_ids", nargs="+", metavar="DOC_ID")
    p.add_argument("--reason", required=True, help="why (rights, request, error): kept with the tombstone")
    p.add_argument("--force", action="store_true",
                   help="tombstone ids the serving generation does not hold (never to be ingested)")
    p.set_defaults(func=cmd_delete)

    p = add_command(sub, common, "gc", "retire old generations and remove them from disk",
                    "mabillon gc")
    p.set_defaults(func=cmd_gc)

    p = add_command(sub, common, "pin", "keep a generation through garbage collection",
                    "mabillon pin g0002  (--unpin to release it)")
    p.add_argument("generation")
    p.add_argument("--unpin", action="store_true")
    p.set_defaults(func=cmd_pin)

    p = add_command(sub, common, "reindex", "rebuild a published generation's lexical index in place "
                    "(queries serve a missing one from a scratch copy, flagged, until then)",
                    "mabillon reindex g0003")
    p.add_argument("generation")
    p.set_defaults(func=cmd_reindex)


def _routing_text(r, changed: bool) -> str:
    if not changed:
        return f"{r.serving} is already serving; nothing changed"
    last = r.history[-1]
    return (f"serving {r.serving} ({last.action} by {last.actor}, was {last.from_generation})"
            + (f": {last.reason}" if last.reason else ""))


def _run_switch(args, settings, switch: Callable[[], object]) -> int:
    """`switch` imports its flow when called: connected first, the command gets its home's
    temporary server; with Prefect imported before, it got Prefect's own in this process
    (2 s of server imports here, and a server that waits 5 s to stop)."""
    from flows.cli.prefect_api import connect

    before = len(_routing(settings).history)
    with connect(settings) as link:
        link.ready()
        routing = switch()
    emit(args, routing.model_dump(mode="json"), _routing_text(routing, len(routing.history) > before))
    return 0


def cmd_promote(args: argparse.Namespace, settings: MabillonSettings) -> int:
    layout = _layout(settings)
    routing = _routing(settings)
    if routing.serving == args.generation:  # said at once, without starting anything
        emit(args, routing.model_dump(mode="json"), _routing_text(routing, changed=False))
        return 0
    from tasks.ops.switching import check_servable

    check_servable(layout, args.generation, routing)

    def switch():
        from flows.operate import PromoteParams, promote

        return promote(PromoteParams(generation=args.generation, reason=args.reason), settings=settings)

    return _run_switch(args, settings, switch)


def cmd_rollback(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from tasks.ops.switching import check_servable, previously_serving

    layout = _layout(settings)
    routing = _routing(settings)
    target = args.to or previously_serving(routing)
    if target is None:
        raise CliError("nothing served before the current generation", Exit.NOT_READY,
                       "name the generation to return to: mabillon rollback --to GEN")
    check_servable(layout, target, routing)

    def switch():
        from flows.operate import RollbackParams, rollback

        return rollback(RollbackParams(to=args.to, reason=args.reason), settings=settings)

    return _run_switch(args, settings, switch)


def cmd_canary(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.cli.prefect_api import connect

    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    with connect(settings) as link:
        from flows.operate import CanaryParams, canary

        link.ready()
        routing = canary(CanaryParams(generation=args.generation, groups=groups, reason=args.reason,
                                      stop=args.stop), settings=settings)
    lines = [f"serving {routing.serving} to everyone else"]
    lines += [f"canary {c.generation} → groups {', '.join(c.groups)} (since {c.since:%Y-%m-%d %H:%M:%S})"
              for c in routing.canaries] or ["no canary"]
    emit(args, routing.model_dump(mode="json"), "\n".join(lines))
    return 0


def cmd_diff(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.artifacts.generations import diff_lines
    from flows.cli.release import serving_or_named
    from tasks.ops.diff import diff_generations

    layout = _layout(settings)
    a, b = serving_or_named(layout, args.a), serving_or_named(layout, args.b)
    d = diff_generations(layout, a, b)
    emit(args, d.model_dump(mode="json"), "\n".join(diff_lines(d)))
    return 0


def cmd_shadow(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from pathlib import Path

    from flows.cli.release import serving_or_named
    from tasks.ops.shadow import load_shadow_questions, shadow_compare
    from tasks.access.principals import resolve_principal

    questions = Path(args.questions)
    if not questions.is_file():
        raise CliError(f"no such question file: {questions}", Exit.NOT_FOUND)
    layout = _layout(settings)
    serving_or_named(layout, args.generation)
    if _routing(settings).serving is None:
        raise CliError("nothing is serving yet, so there is nothing to compare with", Exit.NOT_READY,
                       f"promote a generation first: mabillon promote {args.generation}")
    principal = resolve_principal(settings, args.principal)
    r = shadow_compare(settings, principal, args.generation, load_shadow_questions(questions),
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
    if not args.reason.strip():
        raise CliError("a deletion needs a reason (--reason \"...\"): it is kept with the tombstone",
                       Exit.USAGE)
    layout = _layout(settings)
    from tasks.store.documents import unknown_documents

    unknown = unknown_documents(layout, list(dict.fromkeys(args.doc_ids)))
    if unknown and not args.force:  # refused here, before Prefect starts
        doc_id, near = next(iter(unknown.items()))
        more = f" (and {len(unknown) - 1} more unknown)" if len(unknown) > 1 else ""
        hint = (f"did you mean {', '.join(near)}? " if near else "") + \
            "--force tombstones an id that is not ingested yet"
        raise CliError(f"no document {doc_id!r} in the serving generation{more}; nothing was deleted",
                       Exit.NOT_FOUND, hint)
    from flows.cli.prefect_api import connect

    with connect(settings) as link:
        from flows.operate import DeleteParams, delete

        link.ready()
        r = delete(DeleteParams(doc_ids=args.doc_ids, reason=args.reason, force=args.force),
                   settings=settings)
    lines = [f"deleted {', '.join(r.doc_ids)}: {args.reason}",
             f"gone from answers after {r.masked_after_s * 1000:.1f} ms (tombstone)"]
    if r.unknown:
        lines.append(f"not in the serving generation (tombstoned, as forced): {', '.join(r.unknown)}")
    if r.behind:  # the mask holds; the rest is settled by the holder as it lets the slot go
        lines.append(f"the release slot is held by {r.behind}: the generation without them and the "
                     "removal from disk follow as it ends")
    else:
        if r.published_after_s is not None:
            lines.append(f"generation {r.generation} without them serving after {r.published_after_s:.2f} s")
        lines.append(f"gone from disk after {r.purged_after_s:.2f} s" if r.purged_after_s is not None
                     else "physical removal after the retention window (`mabillon gc`)")
    emit(args, r.model_dump(mode="json"), "\n".join(lines))
    return 0


def cmd_gc(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.cli.prefect_api import connect

    with connect(settings) as link:
        from flows.operate import gc

        link.ready()
        r = gc(settings=settings)
    lines = [f"kept {', '.join(r.kept) or '-'}; retired {', '.join(r.retired) or 'nothing'}",
             f"removed {r.cache_files_removed} cache files, {r.blobs_removed} blobs"]
    if r.purge:
        lines.append(f"purged {', '.join(r.purge.doc_ids)} from {', '.join(r.purge.generations_rewritten)}")
    emit(args, r.model_dump(mode="json"), "\n".join(lines))
    return 0


def cmd_pin(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.operate import pin

    r = pin(_layout(settings), args.generation, pinned=not args.unpin)
    emit(args, r.model_dump(mode="json"), f"pinned: {', '.join(r.pinned) or '-'}")
    return 0


def cmd_reindex(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from tasks.ops.reindex import reindex_lexical

    built = reindex_lexical(_layout(settings), args.generation, settings.retrieval)
    emit(args, built.model_dump(mode="json"),
         f"{args.generation}: lexical index {built.path} rebuilt ({built.rows} rows, "
         f"{built.terms} terms, {built.build_s:.1f} s)")
    return 0
