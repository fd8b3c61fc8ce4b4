"""`mabillon documents [--corpus C] [--match TEXT]`: find a document id (for lineage, delete).

Reads the generation's lineage snapshot; never imports Prefect or a model.
"""
from __future__ import annotations

import argparse

from flows.cli.main import add_command, emit
from schemas.settings import MabillonSettings


def register(sub, common) -> None:
    p = add_command(sub, common, "documents", "list the documents of a generation, or find one",
                    'mabillon documents --corpus journal_officiel --match "séance du 2 mars"')
    p.add_argument("--corpus", help="only this corpus (exact name)")
    p.add_argument("--match", metavar="TEXT",
                   help="part of the id or the title (case and accents ignored)")
    p.add_argument("--generation", help="default: the serving generation")
    p.add_argument("--limit", type=int, default=50, help="rows printed (all are in --json); 0: all")
    p.set_defaults(func=cmd_documents)


def cmd_documents(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.cli.errors import CliError, Exit
    from flows.cli.release import serving_or_named
    from tasks.markup import visible
    from tasks.store.documents import corpora, list_documents
    from tasks.store.layout import StoreLayout
    from tasks.store.tombstones import read_tombstones

    layout = StoreLayout.from_settings(settings)
    generation = serving_or_named(layout, args.generation)
    if args.corpus and args.corpus not in (known := corpora(layout, generation)):
        raise CliError(f"no corpus {args.corpus!r} in generation {generation}", Exit.NOT_FOUND,
                       f"corpora: {', '.join(known)}")
    rows = list_documents(layout, generation, corpus=args.corpus, match=args.match,
                          tombstoned=set(read_tombstones(layout).doc_ids))
    shown = rows if args.limit <= 0 else rows[:args.limit]
    # one line per document whatever its id holds: a line break or ESC shows as an escape
    lines = [f"{visible(d.doc_id)}  [{visible(d.corpus or '-')}, {d.date or 'undated'}]  "
             f"{d.chunks} chunk{'s' if d.chunks != 1 else ''}"
             + (f"  {visible(d.title)}" if d.title and d.title != d.doc_id else "")
             + ("  (deleted)" if d.deleted else "") for d in shown]
    what = " matching" if args.match or args.corpus else ""
    lines.append(f"{len(rows)} document{'s' if len(rows) != 1 else ''}{what} in {generation}"
                 + (f" ({len(shown)} shown; --limit 0 shows all)" if len(shown) < len(rows) else ""))
    emit(args, {"generation": generation, "documents": [d.model_dump() for d in rows]}, "\n".join(lines))
    return 0
