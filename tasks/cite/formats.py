"""References as the files reference managers read: RIS, BibTeX, CSL-JSON, and a CSV of the
ranked list. Pure functions of `Reference`s; each format is written by its well-kept library
where there is one (rispy for RIS, bibtexparser with pylatexenc's escaping for BibTeX), so
quoting and escaping are theirs, not ours.

The pins a colleague needs (generation, revision, digest, page, region, image) go in each
format's own field where it has one and in its note field otherwise, so that a reference manager
that keeps only standard fields (Zotero) still keeps them.
"""
from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable

from schemas.citation import ExportFormat, Reference

_DATE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")
CSV_COLUMNS = ("rank", "status", "title", "container", "corpus", "date", "identifier", "page",
               "region", "image", "generation", "revision", "digest", "link", "doc_id", "quote",
               "question", "note")


def date_parts(date: str | None) -> list[int] | None:
    """[year, month, day] (as far as recorded) of an ISO date; None when it is not one."""
    found = _DATE.match(date or "")
    return [int(p) for p in found.groups() if p is not None] if found else None


# ---- RIS ---------------------------------------------------------------------------------------

def ris_entry(ref: Reference) -> dict:
    """One RIS record in rispy's names: a newspaper article (NEWS) with its newspaper (T2),
    date (DA, PY), page (SP), the library's identifier (AN), the evidence link (UR) and the
    pins as notes (N1)."""
    parts = date_parts(ref.date)
    entry = {"type_of_reference": "NEWS", "id": ref.key, "title": ref.title,
             "urls": [ref.link] + ([ref.image] if ref.image else []),
             "notes": [ref.verification()] + ([f"question: {ref.question}"] if ref.question else []),
             "name_of_database": ref.corpus or None, "secondary_title": ref.container,
             "accession_number": ref.identifier, "call_number": ref.doc_id,
             "start_page": str(ref.page) if ref.page is not None else None,
             "year": str(parts[0]) if parts else None,
             "date": ris_date(parts),
             "abstract": ref.quote}
    return {k: v for k, v in entry.items() if v not in (None, "", [])}


def ris_date(parts: list[int] | None) -> str | None:
    """RIS's DA: YYYY/MM/DD/ with the parts not recorded left empty."""
    if not parts:
        return None
    y, m, d = (parts + [None, None])[:3]
    return f"{y:04d}/{'' if m is None else f'{m:02d}'}/{'' if d is None else f'{d:02d}'}/"


def render_ris(refs: list[Reference]) -> str:
    import rispy

    class Plain(rispy.RisWriter):
        def set_header(self, count: int) -> str:
            return ""  # no "1." counter line before each record: plain RIS

    # one line per value: a line break inside a value would start a line RIS reads as a tag
    entries = [{k: [" ".join(x.split()) for x in v] if isinstance(v, list) else " ".join(v.split())
                for k, v in ris_entry(r).items()} for r in refs]
    return rispy.dumps(entries, implementation=Plain) if refs else ""


# ---- BibTeX ------------------------------------------------------------------------------------

# fields holding prose, escaped for LaTeX; the others (addresses, ids, digests) are verbatim
BIBTEX_TEXT_FIELDS = ("title", "journal", "note", "annote", "howpublished")


def bibtex_fields(ref: Reference) -> dict[str, str]:
    parts = date_parts(ref.date)
    fields = {"title": ref.title, "journal": ref.container, "date": ref.date if parts else None,
              "year": str(parts[0]) if parts else None,
              "pages": str(ref.page) if ref.page is not None else None,
              "url": ref.link, "ark": ref.identifier, "eprint": ref.identifier,
              "eprinttype": "ark" if ref.identifier and ref.identifier.startswith("ark:/") else None,
              "generation": ref.generation, "revision": ref.revision, "sha256": ref.digest,
              "iiif_region": ref.region, "iiif_image": ref.image, "docid": ref.doc_id,
              "note": ref.verification(), "annote": ref.quote,
              "howpublished": ref.corpus if ref.corpus and ref.corpus != ref.container else None}
    return {k: v for k, v in fields.items() if v}


def render_bibtex(refs: list[Reference]) -> str:
    from bibtexparser import Library, write_string
    from bibtexparser.model import Entry, Field
    from pylatexenc.latexencode import unicode_to_latex

    library = Library()
    for ref in refs:
        fields = [Field(k, unicode_to_latex(v) if k in BIBTEX_TEXT_FIELDS else _verbatim(v))
                  for k, v in bibtex_fields(ref).items()]
        library.add(Entry("article", ref.key, fields))
    return write_string(library)


def _verbatim(value: str) -> str:
    """A value kept as written inside {…}: only what would unbalance the braces is dropped
    (addresses and ids carry none; a stray one must not end the entry)."""
    return value.replace("{", "%7B").replace("}", "%7D").replace("\\", "%5C")


# ---- CSL-JSON ----------------------------------------------------------------------------------

def csl_item(ref: Reference) -> dict:
    """One CSL-JSON item (CSL 1.0.2 variables): `article-newspaper`, archive and location."""
    parts = date_parts(ref.date)
    item = {"id": ref.key, "type": "article-newspaper", "title": ref.title,
            "container-title": ref.container, "archive": ref.corpus,
            "archive_location": ref.identifier or ref.doc_id,
            "page": str(ref.page) if ref.page is not None else None, "URL": ref.link,
            "note": ref.verification(), "source": "Mabillon " + ref.generation,
            "version": ref.revision, "annote": ref.quote,
            "issued": ({"date-parts": [parts]} if parts else {"literal": ref.date}) if ref.date else None}
    return {k: v for k, v in item.items() if v not in (None, "")}


def render_csl_json(refs: list[Reference]) -> str:
    return json.dumps([csl_item(r) for r in refs], ensure_ascii=False, indent=2) + "\n"


# ---- CSV ---------------------------------------------------------------------------------------

def render_csv(refs: list[Reference]) -> str:
    """The ranked list, one row per document; a cell a spreadsheet would run as a formula
    (=, +, -, @ first) starts with an apostrophe."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    for ref in refs:
        row = ref.model_dump(include=set(CSV_COLUMNS))
        writer.writerow({k: _cell(row.get(k)) for k in CSV_COLUMNS})
    return out.getvalue()


def _cell(value) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


RENDERERS: dict[str, Callable[[list[Reference]], str]] = {
    "ris": render_ris, "bibtex": render_bibtex, "csl-json": render_csl_json, "csv": render_csv}


def render(refs: list[Reference], fmt: ExportFormat) -> str:
    return RENDERERS[fmt](refs)
