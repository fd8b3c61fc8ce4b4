"""The OCR-quality value of a document: the delivered confidence where there is one, else the
OCR engine's, else the lexicon estimate from the text; and it reaches the chunk rows."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from schemas.lineage import Chunk, ParsedDocument, ParsedPage, Revision
from schemas.package import ARTICLE_MEDIA_TYPE
from schemas.settings import MabillonSettings
from tasks.ingest.acquire import AccessDefaults, iter_inputs
from tasks.ingest.merge import chunks_table
from tasks.ingest.ocr_quality import lexicon_share, ocr_quality
from tasks.ingest.parse import parse_revision
from tests.fixtures import newspaper_package as news

CLEAN = ("La Chambre des députés a repris hier la discussion du budget de la guerre. "
         "Le président du conseil a répondu aux interpellations avec beaucoup de fermeté.")
GARBLED = ("Lu Cliambre dcs dópulés a rcpris liicr la diseussion dn bndgel dc la gnerre. "
           "Le piésidcnt dn conscil a rópondu anx intcrpellalions avcc bcaucoup dc fcrmeté.")


def doc(*pages: tuple[str, str, float | None]) -> ParsedDocument:
    return ParsedDocument(revision_id="r1", pages=[
        ParsedPage(page_no=n, raw_text=text, normalized_text=text, parser=parser, parser_version="1",
                   ocr_confidence=conf) for n, (text, parser, conf) in enumerate(pages, start=1)])


def test_the_estimate_tells_clean_french_from_garbled_ocr():
    clean, garbled = lexicon_share(CLEAN), lexicon_share(GARBLED)
    assert clean > 0.95
    assert garbled < 0.6
    assert lexicon_share("1887 — 12 : 14 ; l' d'") is None  # no word of two letters: unknown


def test_a_text_only_document_gets_the_estimate():
    q = ocr_quality(doc((GARBLED, "plaintext", None)))
    assert q.source == "estimated" and q.value == lexicon_share(GARBLED)
    empty = ocr_quality(doc(("  ", "plaintext", None)))
    assert empty.value is None and empty.source is None


def test_delivered_confidence_takes_precedence_over_the_estimate():
    # the package's article confidence wins, even over clean text and page values
    meta = json.dumps({"ocr": {"confidence": 0.71, "pages": {"1": {"pc": 0.9}}}})
    assert ocr_quality(doc((CLEAN, "mets-alto", 0.8)), meta).model_dump() == {"value": 0.71, "source": "delivered"}
    # ALTO pages' own confidence, weighted by their characters
    alto = ocr_quality(doc(("a" * 300, "alto", 0.9), ("b" * 100, "alto", 0.5)))
    assert alto.model_dump() == {"value": pytest.approx(0.8), "source": "delivered"}
    # BnF's "OCR BRUT nn %" (a percentage) where nothing else is delivered
    brut = json.dumps({"ocr": {"confidence": None, "pages": {"1": {"ocr_brut": 82.11}}}})
    assert ocr_quality(doc((CLEAN, "plaintext", None)), brut).model_dump() == {
        "value": pytest.approx(0.8211), "source": "delivered"}
    # our own OCR's confidence, before the estimate, under its own name
    assert ocr_quality(doc((CLEAN, "tesseract/fra", 0.66))).model_dump() == {"value": 0.66, "source": "ocr"}


def test_a_generated_package_article_carries_its_delivered_confidence(tmp_path: Path):
    bag = news.make_package(tmp_path / "bag")
    found = {p.source.doc_id: (p.source, p.read()) for p in iter_inputs(
        [str(bag)], AccessDefaults(corpus=None, tenant="default", groups=("public",)), [])}
    source, data = found[f"{news.PREFIX}/a001"]
    rev = Revision(revision_id="r1", source_id=source.source_id, doc_id=source.doc_id, uri=source.uri,
                   corpus=source.corpus, date=source.date, title=source.title, tenant=source.tenant,
                   groups=source.groups, digest="0", size=len(data), media_type=ARTICLE_MEDIA_TYPE,
                   acquired_at="2026-01-01T00:00:00Z", metadata_json=json.dumps(source.metadata))
    q = ocr_quality(parse_revision(data, rev, MabillonSettings().parsing), rev.metadata_json)
    assert q.source == "delivered" and q.value == pytest.approx(source.metadata["ocr"]["confidence"])


def test_chunk_rows_carry_their_documents_quality():
    rev = Revision(revision_id="r1", source_id="s1", doc_id="d1", uri="file:///d1", corpus="c", date=None,
                   title=None, tenant="t", groups=["public"], digest="0", size=1, media_type="text/plain",
                   acquired_at=datetime(2026, 1, 1, tzinfo=timezone.utc))
    chunk = Chunk(chunk_id="d1#0", revision_id="r1", doc_id="d1", ordinal=0, text=GARBLED, n_tokens=20,
                  char_start=0, char_end=len(GARBLED), page_start=1, page_end=1, segmenter="toy")
    quality = {"r1": ocr_quality(doc((GARBLED, "plaintext", None)))}
    row = chunks_table([chunk], {"r1": rev}, quality).to_pylist()[0]
    assert row["ocr_quality"] == pytest.approx(quality["r1"].value, abs=1e-6)
    assert row["ocr_quality_source"] == "estimated"
    assert chunks_table([chunk], {"r1": rev}).to_pylist()[0]["ocr_quality"] is None
