"""CLI commands of the release side: ingest, generations, lineage.

`generations` and `lineage` read the state files directly: they never import Prefect.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from flows.cli.errors import CliError, Exit
from flows.cli.harvest import add_date_options, harvest_references, report_lines
from flows.cli.main import add_command, emit
from schemas.harvest import is_gallica_reference
from schemas.settings import MabillonSettings
from tasks.markup import visible

# Store modules are imported inside the commands: a command's start-up pays only for its own.


def register(sub, common) -> None:
    p = add_command(sub, common, "ingest", "ingest files, folders or JSONL exports (local, file:// or "
                    "s3://), or issues harvested from Gallica, and publish a generation",
                    "mabillon ingest scans/ --corpus registres --tenant t1 --groups public,staff")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="local paths, file:// URIs, or s3://bucket/key (an object) and "
                        "s3://bucket/prefix/ (read like a folder); S3 endpoint and credentials "
                        "from the storage settings (AWS_* variables); or a Gallica reference "
                        "(ark:/12148/bpt6k… an issue, ark:/12148/cb… a title with --from/--to, "
                        "sru:QUERY), harvested first (see `mabillon harvest`)")
    add_date_options(p)
    p.add_argument("--corpus", help="corpus of inputs that do not name one (sidecar, record)")
    p.add_argument("--tenant", help="tenant of inputs that do not name one (default: 'default')")
    p.add_argument("--groups", help="comma-separated access groups (default: public)")
    p.add_argument("--no-promote", action="store_true", help="publish as staged; do not serve")
    gate = p.add_mutually_exclusive_group()
    gate.add_argument("--gate", dest="gate", action="store_true", default=None,
                      help="publish staged, shadow it, and wait for a decision in the Prefect UI "
                           "(needs PREFECT_API_URL: a running server, e.g. `mabillon serve`)")
    gate.add_argument("--no-gate", dest="gate", action="store_false", help="release without the gate setting")
    p.set_defaults(func=cmd_ingest)

    p = add_command(sub, common, "generations", "list the generations: serving, canary, staged, retired",
                    "mabillon generations --json")
    p.set_defaults(func=cmd_generations)

    p = add_command(sub, common, "lineage", "show a document's source, revisions, pages and chunks",
                    "mabillon lineage 1887-01-11_003_000")
    p.add_argument("doc_id", help="a document id (find one with `mabillon documents --match`)")
    p.add_argument("--generation", help="default: the serving generation")
    p.set_defaults(func=cmd_lineage)


def missing_local_paths(paths: list[str]) -> list[str]:
    """Named local inputs that do not exist (URIs are checked by acquire, which can reach them)."""
    out = []
    for p in paths:
        if p.startswith("s3://"):
            continue
        local = p[len("file://"):] if p.startswith("file://") else p
        if not Path(local).exists():
            out.append(p)
    return out


def cmd_ingest(args: argparse.Namespace, settings: MabillonSettings) -> int:
    missing = missing_local_paths([p for p in args.paths if not is_gallica_reference(p)])
    if missing:
        raise CliError(f"no such file or folder: {', '.join(missing)}; nothing was ingested",
                       Exit.NOT_FOUND)
    args.paths, harvested = harvest_references(args, settings)
    if not args.paths:
        raise CliError("no issue could be harvested; nothing was ingested", Exit.UNAVAILABLE,
                       "\n".join(report_lines(harvested)))
    from flows.cli.prefect_api import connect

    with connect(settings) as link:
        from flows.release import ReleaseOptions, release

        options = ReleaseOptions(
            corpus=args.corpus, tenant=args.tenant, promote=not args.no_promote, gate=args.gate,
            groups=[g.strip() for g in args.groups.split(",") if g.strip()] if args.groups else None)
        gated = settings.gate.enabled if args.gate is None else args.gate
        if gated and link.source == "temporary":  # nobody could reach this server to decide
            raise CliError("a gated release waits for a decision in the Prefect UI, and no Prefect "
                           "server runs for this home", Exit.USAGE,
                           "start `mabillon serve` for this home (or set PREFECT_API_URL), or --no-gate")
        link.ready()
        result = release(paths=args.paths, options=options, settings=settings)
    payload = result.model_dump(mode="json", exclude={"published"})
    if harvested:
        payload["harvest"] = [r.model_dump(mode="json") for r in harvested]
    state = (f"published; gate decision: {result.decision}" + ("" if result.serving else ", not serving")
             if result.decision else
             "published and serving" if result.published and result.serving else
             "published, staged (not serving)" if result.published else
             "nothing new to publish; serving unchanged" if result.generation else
             "nothing published: no input was accepted")
    run = result.run
    lines = [f"generation {result.generation or '-'}: {state}",
             f"this run: {run.added} added, {run.changed} changed, {run.unchanged} unchanged, "
             f"{run.quarantined} quarantined",
             "holds: " + ", ".join(f"{k} {v}" for k, v in result.counts.model_dump().items())]
    lines += [f"  quarantined {visible(q.uri)}: {visible(q.reason)}" for q in result.quarantined]
    lines += report_lines(harvested)
    if result.manifest:
        lines.append(f"manifest: {result.manifest}")
    if result.release_record:
        lines.append(f"release record: {result.release_record}")
    emit(args, payload, "\n".join(lines))
    unreachable = [q.uri for q in result.quarantined if q.uri in args.paths]
    if unreachable and len(unreachable) == len(args.paths):
        raise CliError(f"no input could be read: {', '.join(unreachable)}", Exit.NOT_FOUND)
    return 0


def cmd_generations(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.artifacts.generations import counts_words, status_words
    from tasks.ops.generations import generation_statuses
    from tasks.store.layout import StoreLayout

    statuses = generation_statuses(StoreLayout.from_settings(settings))
    lines = [f"{s.generation}  {status_words(s):38}  {s.created_at:%Y-%m-%d %H:%M:%S}  {counts_words(s)}"
             for s in statuses]
    emit(args, [s.model_dump(mode="json") for s in statuses],
         "\n".join(lines) or "no generations yet (mabillon ingest PATH publishes the first)")
    return 0


def serving_or_named(layout, generation: str | None) -> str:
    from tasks.store.lineage_store import has_lineage
    from tasks.store.manifests import list_generations
    from tasks.store.routing import read_routing

    if generation is None:
        generation = read_routing(layout).serving
        if generation is None:
            raise CliError("nothing is serving yet in this home", Exit.NOT_READY,
                           "ingest first (mabillon ingest PATH) or give --generation")
        return generation
    if generation not in list_generations(layout):
        raise CliError(f"no generation {generation!r}", Exit.NOT_FOUND, "see: mabillon generations")
    if not has_lineage(layout, generation):
        raise CliError(f"generation {generation} was removed by gc; its lineage is gone",
                       Exit.NOT_FOUND, "see: mabillon generations")
    return generation


def unknown_document(layout, generation: str, doc_id: str) -> CliError:
    from tasks.store.documents import did_you_mean, document_ids

    near = did_you_mean(doc_id, document_ids(layout, generation))
    hint = (f"did you mean {', '.join(near)}?" if near else
            "list ids with: mabillon documents --match TEXT")
    return CliError(f"no document {doc_id!r} in generation {generation}", Exit.NOT_FOUND, hint)


def cmd_lineage(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from tasks.store.layout import StoreLayout
    from tasks.store.lineage_query import document_lineage

    layout = StoreLayout.from_settings(settings)
    generation = serving_or_named(layout, args.generation)
    try:
        info = document_lineage(layout, generation, args.doc_id)
    except KeyError:
        raise unknown_document(layout, generation, args.doc_id) from None
    src = info["source"]
    lines = [f"{src['doc_id']}  ({src['corpus']}; tenant {src['tenant']}; groups {','.join(src['groups'])})",
             f"  source {src['uri']}", "  revisions:"]
    for r in info["revisions"]:
        lines.append(f"    {'*' if r['is_current'] else ' '} {r['revision_id']}  sha256:{r['digest']}  "
                     f"{r['media_type']}  {r['size']} bytes  acquired {r['acquired_at']}"
                     + (f"  valid {r['valid_from'] or '…'} → {r['valid_to'] or '…'}"
                        if r['valid_from'] or r['valid_to'] else ""))
    lines.append("  pages:")
    for p in info["pages"]:
        conf = f"  OCR confidence {p['ocr_confidence']:.1f}" if p["ocr_confidence"] is not None else ""
        lines.append(f"    p{p['page_no']}  {p['parser']} ({p['parser_version']}){conf}  {p['raw_chars']} chars"
                     + (f"  [{p['empty_reason']}]" if p["empty_reason"] else ""))
    lines.append("  chunks:")
    for c in info["chunks"]:
        box = f"  bbox {[round(x, 1) for x in c['bbox']]}" if c["bbox"] else ""
        lines.append(f"    {c['chunk_id']}  p{c['page']}{box}  chars {c['char_start']}-{c['char_end']}  "
                     f"{c['n_tokens']} tok  {c['text'][:70]!r}")
    emit(args, info, "\n".join(lines))
    return 0
