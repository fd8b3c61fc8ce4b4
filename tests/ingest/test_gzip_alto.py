"""A lone gzipped ALTO file (outside any package) is known by its bytes, not its name, and read
as the document its uncompressed form gives; a gzip bomb or a damaged gzip is quarantined with
its reason, and the rest of the batch goes on (issue 33)."""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest

from schemas.generation import Quarantined
from schemas.settings import InspectionLimits, MabillonSettings
from tasks.ingest.acquire import AccessDefaults, iter_inputs
from tasks.ingest.gunzip import InflateRefused, inflate
from tasks.ingest.inspect import inspect_revision
from tasks.ingest.parse import parse_revision
from tasks.ingest.parse.errors import ParseRefused
from tests.fixtures import make_samples as fx

LIMIT = 1 << 20  # a small configured limit, so a bomb is cheap to make and to refuse
DEFAULTS = AccessDefaults(corpus=None, tenant="t", groups=("g",))


def bomb(inflated: int, head: bytes = fx.alto()[:200]) -> bytes:
    """An ALTO head followed by spaces: `inflated` bytes in a few kilobytes."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts, left = [packer.compress(head)], inflated - len(head)
    while left > 0:
        parts.append(packer.compress(b" " * min(left, 1 << 20)))
        left -= 1 << 20
    return b"".join(parts) + packer.flush()


def settings(limit: int = LIMIT) -> MabillonSettings:
    return MabillonSettings(limits=InspectionLimits(max_bytes=limit))


def ingest(folder: Path, limit: int = LIMIT) -> tuple[dict[str, object], dict[str, str]]:
    """doc_id → ParsedDocument, and file name → quarantine reason, of a folder through acquisition,
    inspection and parsing as the release flow runs them (each file on its own)."""
    config, refused, docs = settings(limit), [], {}
    for pending in iter_inputs([str(folder)], DEFAULTS, refused):
        data = pending.read()
        rev = fx.revision_for(Path(pending.source.uri).name, data).model_copy(
            update={"doc_id": pending.source.doc_id, "title": pending.source.title})
        accepted, quarantined = inspect_revision(rev, data, config.limits)
        if quarantined is not None:
            refused.append(quarantined)
            continue
        try:
            docs[accepted.doc_id] = (accepted, parse_revision(data, accepted, config.parsing))
        except ParseRefused as exc:
            refused.append(Quarantined(uri=accepted.uri, reason=str(exc), digest=accepted.digest))
    return docs, {Path(q.uri).name: q.reason for q in refused}


def pages(doc) -> list[dict]:
    return [page.model_dump() for page in doc.pages]


@pytest.mark.parametrize("name", ["page-0001.xml.gz", "page-0001.xml", "page-0001.alto", "page-0001.gz",
                                  "page-0001"])
def test_gzipped_alto_is_known_by_its_bytes_whatever_its_name(name):
    data = gzip.compress(fx.alto())
    accepted, refused = inspect_revision(fx.revision_for(name, data), data, InspectionLimits())
    assert refused is None, refused
    assert accepted.media_type == "application/alto+xml"


def test_a_lone_gzipped_alto_is_the_document_its_uncompressed_form_gives(tmp_path: Path):
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    plain.mkdir(), packed.mkdir()
    (plain / "page-0001.xml").write_bytes(fx.alto())
    (packed / "page-0001.xml.gz").write_bytes(gzip.compress(fx.alto()))
    (packed / "page-0002.xml").write_bytes(fx.alto("affiche-1848"))  # the rest of the batch
    expected, _ = ingest(plain)
    found, refused = ingest(packed)
    assert refused == {}
    assert set(found) == {"page-0001", "page-0002"}  # named as its uncompressed form is
    (rev, doc), (plain_rev, plain_doc) = found["page-0001"], expected["page-0001"]
    assert rev.title == plain_rev.title == "page-0001"
    assert pages(doc) == pages(plain_doc)  # same text, pages, boxes and confidences
    page = doc.pages[0]
    assert page.parser == "alto" and page.raw_text and page.ocr_confidence is not None
    assert any(e.kind == "word" and e.bbox and e.confidence is not None for e in page.elements)


def test_a_gzip_bomb_and_a_damaged_gzip_are_quarantined_and_the_batch_goes_on(tmp_path: Path):
    whole = gzip.compress(fx.alto())
    (tmp_path / "bombe.xml.gz").write_bytes(bomb(LIMIT + 1))
    (tmp_path / "tronque.xml.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "crc.xml.gz").write_bytes(whole[:-8] + bytes(8))  # the trailer's CRC and size wrong
    (tmp_path / "texte.txt.gz").write_bytes(gzip.compress("Procès-verbal de la séance.".encode()))
    (tmp_path / "page-0001.xml.gz").write_bytes(whole)
    found, refused = ingest(tmp_path)
    assert set(found) == {"page-0001"}
    assert refused["bombe.xml.gz"] == f"gzip bomb: inflates beyond the limit of {LIMIT} bytes"
    assert refused["tronque.xml.gz"] == "corrupt gzip: the compressed stream is truncated"
    assert refused["crc.xml.gz"].startswith("corrupt gzip: ")
    assert refused["texte.txt.gz"].startswith("gzip-compressed text/plain: of compressed files only ALTO is read")


def test_just_under_the_limit_is_read_and_the_limit_is_the_configured_one():
    near = bomb(LIMIT - 1000, head=b"")
    assert len(inflate(near, LIMIT)) == LIMIT - 1000
    with pytest.raises(InflateRefused, match="gzip bomb"):
        inflate(near, LIMIT - 1001)


def test_the_parser_refuses_a_bomb_itself_under_its_own_limit():
    """Parsing does not rely on inspection having run: it inflates within the settings' limit."""
    data = bomb(LIMIT + 1)
    rev = fx.revision_for("page.xml.gz", data, "application/alto+xml")
    with pytest.raises(ParseRefused, match="gzip bomb"):
        parse_revision(data, rev, settings().parsing)
    with pytest.raises(ParseRefused, match="corrupt gzip"):
        parse_revision(data[:500], rev, settings().parsing)


def test_entity_declarations_inside_a_gzip_are_refused_as_in_the_plain_file():
    data = gzip.compress(fx.alto_with_entities())
    _, refused = inspect_revision(fx.revision_for("entites.xml.gz", data), data, InspectionLimits())
    assert "<!DOCTYPE> declaration" in refused.reason
    rev = fx.revision_for("entites.xml.gz", data, "application/alto+xml")
    with pytest.raises(ParseRefused, match="entity or DTD declarations refused"):
        parse_revision(data, rev, settings().parsing)
