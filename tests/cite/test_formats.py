"""Each export format read back by the library a reference manager's importer is built like:
RIS by rispy, BibTeX by bibtexparser (LaTeX decoded by pylatexenc), CSL-JSON rendered by
citeproc-py, CSV by the csv module; every pinned field comes back as it went in."""
from __future__ import annotations

import csv
import io
import json

import pytest

from schemas.citation import Reference
from tasks.cite.formats import render
from tasks.cite.identifiers import library_identifier
from tasks.cite.references import citation_key

HOSTILE_TITLE = "Séance du 2 mars {1887} : 50 % & $x$ \\emph{blés} « Brie » # _ ~\nsuite"
GALLICA = "https://gallica.bnf.fr/ark:/12148/bpt6k7512345j/f3.item"


def refs() -> list[Reference]:
    first = Reference(key="jo-1887-03-02", rank=1, doc_id="jo/1887-03-02", title=HOSTILE_TITLE,
                      container="Le Gaulois", corpus="le_gaulois", date="1887-03-02",
                      identifier="ark:/12148/bpt6k7512345j", page=3, region="xywh=120,340,610,88",
                      image="http://room:4300/iiif/3/r1-p0003/full/max/0/default.jpg#xywh=120,340,610,88",
                      generation="g0003", revision="r1", digest="ab" * 32,
                      link="http://room:4300/queries/q1#doc-1", status="accepted",
                      quote="=SUM(A1) M. Clémenceau demande la parole", question="Qui a parlé des blés ?")
    second = Reference(key="gaulois", rank=2, doc_id="gaulois", title="Sans date", generation="g0003",
                       revision="r2", digest="cd" * 32, link="http://room:4300/queries/q1#doc-2",
                       date="1887", status="retrieved")
    return [first, second]


def test_ris_reads_back_with_rispy_in_ranked_order():
    import rispy

    entries = rispy.loads(render(refs(), "ris"))
    assert [e["id"] for e in entries] == ["jo-1887-03-02", "gaulois"]
    e = entries[0]
    assert e["type_of_reference"] == "NEWS" and e["title"] == " ".join(HOSTILE_TITLE.split())
    assert e["secondary_title"] == "Le Gaulois" and e["accession_number"] == "ark:/12148/bpt6k7512345j"
    assert e["start_page"] == "3" and e["date"] == "1887/03/02/" and e["year"] == "1887"
    assert e["urls"] == ["http://room:4300/queries/q1#doc-1",
                         "http://room:4300/iiif/3/r1-p0003/full/max/0/default.jpg#xywh=120,340,610,88"]
    note = e["notes"][0]
    for pin in ("generation g0003", "revision r1", "sha256 " + "ab" * 32, "page 3", "xywh=120,340,610,88"):
        assert pin in note
    assert entries[1]["date"] == "1887///" and "start_page" not in entries[1]


def test_bibtex_reads_back_with_bibtexparser_and_its_latex_decodes_to_the_text():
    import bibtexparser
    from pylatexenc.latex2text import LatexNodes2Text

    text = render(refs(), "bibtex")
    library = bibtexparser.parse_string(text)
    assert not library.failed_blocks
    assert [e.key for e in library.entries] == ["jo-1887-03-02", "gaulois"]
    entry = library.entries[0]
    f = {field.key: field.value for field in entry.fields}
    decode = LatexNodes2Text(math_mode="verbatim").latex_to_text
    assert decode(f["title"]) == HOSTILE_TITLE
    assert decode(f["journal"]) == "Le Gaulois" and f["date"] == "1887-03-02" and f["pages"] == "3"
    assert f["url"] == "http://room:4300/queries/q1#doc-1" and f["ark"] == "ark:/12148/bpt6k7512345j"
    assert f["eprinttype"] == "ark" and f["generation"] == "g0003" and f["revision"] == "r1"
    assert f["sha256"] == "ab" * 32 and f["iiif_region"] == "xywh=120,340,610,88"
    assert f["iiif_image"].endswith("/iiif/3/r1-p0003/full/max/0/default.jpg#xywh=120,340,610,88")
    assert entry.entry_type == "article"


def test_csl_json_renders_with_citeproc_py_and_keeps_its_fields():
    from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle, formatter
    from citeproc.source.json import CiteProcJSON

    items = json.loads(render(refs(), "csl-json"))
    assert [i["id"] for i in items] == ["jo-1887-03-02", "gaulois"]
    first = items[0]
    assert first["type"] == "article-newspaper" and first["title"] == HOSTILE_TITLE
    assert first["issued"] == {"date-parts": [[1887, 3, 2]]} and first["page"] == "3"
    assert first["archive_location"] == "ark:/12148/bpt6k7512345j" and first["version"] == "r1"
    assert "xywh=120,340,610,88" in first["note"] and first["URL"].endswith("#doc-1")
    source = CiteProcJSON(items)
    style = CitationStylesStyle("harvard-cite-them-right", validate=False)
    bibliography = CitationStylesBibliography(style, source, formatter.plain)
    bibliography.register(Citation([CitationItem("jo-1887-03-02"), CitationItem("gaulois")]))
    rendered = [str(entry) for entry in bibliography.bibliography()]
    assert any("Le Gaulois" in r and "1887" in r for r in rendered), rendered


def test_csv_is_the_ranked_list_and_no_cell_runs_as_a_formula():
    rows = list(csv.DictReader(io.StringIO(render(refs(), "csv"))))
    assert [r["rank"] for r in rows] == ["1", "2"] and rows[0]["doc_id"] == "jo/1887-03-02"
    assert rows[0]["title"] == HOSTILE_TITLE and rows[0]["region"] == "xywh=120,340,610,88"
    assert rows[0]["digest"] == "ab" * 32 and rows[0]["generation"] == "g0003"
    assert rows[0]["quote"] == "'=SUM(A1) M. Clémenceau demande la parole"  # shown, never computed
    assert rows[1]["page"] == "" and rows[1]["identifier"] == ""


@pytest.mark.parametrize("fmt", ["ris", "bibtex", "csl-json"])
def test_no_reference_is_an_empty_file_the_parser_reads_as_empty(fmt):
    import bibtexparser
    import rispy

    text = render([], fmt)
    read = {"ris": lambda t: rispy.loads(t), "bibtex": lambda t: bibtexparser.parse_string(t).entries,
            "csl-json": json.loads}[fmt]
    assert read(text) == []


def test_the_library_identifier_is_an_ark_wherever_the_metadata_holds_one():
    assert library_identifier({"source": {"url": GALLICA}}) == "ark:/12148/bpt6k7512345j/f3.item"
    assert library_identifier({"ark": "ark:/12148/cb32779904b/date"}) == "ark:/12148/cb32779904b/date"
    assert library_identifier({"identifiers": [{"catalogue_id": "FRBNF123"}]}) == "FRBNF123"
    assert library_identifier({"note": "nothing here"}) is None


def test_citation_keys_are_ascii_and_unique():
    taken: set[str] = set()
    keys = [citation_key(d, taken) for d in ("délibérations/an II", "délibérations/an II", "{}")]
    assert keys == ["deliberations-an-II", "deliberations-an-II-2", "doc"]


def test_the_ask_artifact_links_to_the_answers_references_where_a_room_runs():
    from flows.artifacts.links import answer_links
    from schemas.query import Cost, EvidencePackage
    from schemas.settings import MabillonSettings, ReadingRoomSettings

    p = EvidencePackage(question="q?", generation="g0001", space_id="s", provider="rules", documents=[],
                        accepted=[], held=[], rejected=[], rejected_docs=[], retrieved=[], plan=[],
                        briefings=[], flags=[], cost=Cost(), query_id="20260101T000000-abcdef12-1")
    links = dict(answer_links(MabillonSettings(reading_room=ReadingRoomSettings(url="https://salle.example/")), p))
    assert links["references (RIS)"] == "https://salle.example/export/ris/queries/20260101T000000-abcdef12-1"
    assert links["references (CSL-JSON)"].endswith("/export/csl-json/queries/20260101T000000-abcdef12-1")
    assert answer_links(MabillonSettings(), p) == []
