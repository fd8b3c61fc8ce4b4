"""CLI commands of the release side: ingest, generations, lineage."""
from __future__ import annotations

import argparse
import logging

from flows.cli.main import emit
from schemas.generation import GenerationStatus
from schemas.settings import MabillonSettings
from tasks.store.layout import StoreLayout
from tasks.store.manifests import list_generations, read_manifest
from tasks.store.routing import read_routing


def register(sub, common) -> None:
    p = sub.add_parser("ingest", parents=[common], help="ingest files, folders or JSONL exports (local, "
                                                        "file:// or s3://) and publish a generation")
    p.add_argument("paths", nargs="+", help="local paths, file:// URIs, or s3://bucket/key (an object) and "
                                            "s3://bucket/prefix/ (read like a folder); S3 endpoint and "
                                            "credentials from the storage settings (AWS_* variables)")
    p.add_argument("--corpus")
    p.add_argument("--tenant")
    p.add_argument("--groups", help="comma-separated access groups")
    p.add_argument("--no-promote", action="store_true", help="publish as staged; do not serve")
    gate = p.add_mutually_exclusive_group()
    gate.add_argument("--gate", dest="gate", action="store_true", default=None,
                      help="publish staged, shadow it, and wait for a decision in the Prefect UI "
                           "(needs PREFECT_API_URL: a running server, e.g. `mabillon serve`)")
    gate.add_argument("--no-gate", dest="gate", action="store_false", help="release without the gate setting")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("generations", parents=[common], help="list generations and their status")
    p.set_defaults(func=cmd_generations)

    p = sub.add_parser("lineage", parents=[common], help="source, revisions, pages and chunks of a document")
    p.add_argument("doc_id")
    p.add_argument("--generation", help="default: the serving generation")
    p.set_defaults(func=cmd_lineage)


def cmd_ingest(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.release import ReleaseOptions, release

    logging.basicConfig(level=logging.WARNING)
    options = ReleaseOptions(corpus=args.corpus, tenant=args.tenant,
                             groups=[g.strip() for g in args.groups.split(",") if g.strip()] if args.groups else None,
                             promote=not args.no_promote, gate=args.gate)
    result = release(paths=args.paths, options=options, settings=settings)
    payload = result.model_dump(mode="json", exclude={"published"})
    state = (f"published; gate decision: {result.decision}" + ("" if result.serving else ", not serving")
             if result.decision else
             "published and serving" if result.published and result.serving else
             "published, staged (not serving)" if result.published else "nothing new to publish; serving")
    lines = [f"generation {result.generation}: {state}",
             "counts: " + ", ".join(f"{k} {v}" for k, v in result.counts.model_dump().items()),
             "this run: " + ", ".join(f"{k} {v}" for k, v in result.run.model_dump().items())]
    lines += [f"  quarantined {q.uri}: {q.reason}" for q in result.quarantined]
    if result.manifest:
        lines.append(f"manifest: {result.manifest}")
    if result.release_record:
        lines.append(f"release record: {result.release_record}")
    emit(args, payload, "\n".join(lines))
    return 0


def generation_statuses(layout: StoreLayout) -> list[GenerationStatus]:
    routing = read_routing(layout)
    out = []
    for gen in list_generations(layout):
        m = read_manifest(layout, gen)
        canaries = {c.generation for c in routing.canaries}
        status = ("serving" if gen == routing.serving else "retired" if gen in routing.retired
                  else "canary" if gen in canaries else "staged")
        out.append(GenerationStatus(generation=gen, status=status, created_at=m.created_at, counts=m.counts))
    return out


def cmd_generations(args: argparse.Namespace, settings: MabillonSettings) -> int:
    statuses = generation_statuses(StoreLayout.from_settings(settings))
    lines = [f"{s.generation}  {s.status:8}  {s.created_at:%Y-%m-%d %H:%M:%S}  "
             f"sources {s.counts.sources}  chunks {s.counts.chunks}" for s in statuses]
    emit(args, [s.model_dump(mode="json") for s in statuses], "\n".join(lines) or "no generations yet")
    return 0


def cmd_lineage(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from tasks.store.lineage_query import document_lineage

    layout = StoreLayout.from_settings(settings)
    generation = args.generation or read_routing(layout).serving
    if generation is None:
        raise KeyError("nothing is serving yet; ingest first or give --generation")
    info = document_lineage(layout, generation, args.doc_id)
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
