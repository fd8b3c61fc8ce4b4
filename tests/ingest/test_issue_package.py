"""Issue packages (METS + ALTO) at acquisition: found by their METS, fixity-checked, read into
dated, titled articles carrying the package's identifiers; the shared BnF samples and a generated
package of another shape (ALTO v4 in mm10, gzipped, BagIt, no images)."""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from schemas.generation import Quarantined
from schemas.lineage import Revision
from schemas.package import ARTICLE_MEDIA_TYPE
from schemas.settings import InspectionLimits, MabillonSettings
from tasks.ingest.acquire import AccessDefaults, iter_inputs
from tasks.ingest.package.alto_stream import AltoError, read_alto_page
from tasks.ingest.package.fixity import Expected, FixityError, verify
from tasks.ingest.parse import parse_revision
from tests.fixtures import newspaper_package as news

NEWSPAPERS = Path(__file__).resolve().parents[2].parent / "shared" / "newspapers"
GAULOIS = NEWSPAPERS / "europeana-bnf" / "Le-Gaulois" / "18840430_02_1"
DEFAULTS = AccessDefaults(corpus=None, tenant="default", groups=("public",))
LIMIT = 1 << 20  # a small configured size limit: a page inflating beyond it is cheap to make and to refuse

needs_samples = pytest.mark.skipif(not NEWSPAPERS.exists(), reason=f"shared samples not found at {NEWSPAPERS}")


def inputs(*paths: Path, limits: InspectionLimits | None = None) -> tuple[dict[str, tuple], list[Quarantined]]:
    """doc_id → (SourceInput, bytes) of what acquisition makes of the paths, and what it refused."""
    quarantined: list[Quarantined] = []
    out = {}
    for pending in iter_inputs([str(p) for p in paths], DEFAULTS, quarantined, limits=limits):
        out[pending.source.doc_id] = (pending.source, pending.read())
    return out, quarantined


def digests(found: dict[str, tuple]) -> dict[str, str]:
    return {doc_id: hashlib.sha256(data).hexdigest() for doc_id, (_, data) in found.items()}


def parsed(source, data: bytes):
    rev = Revision(revision_id="r1", source_id=source.source_id, doc_id=source.doc_id, uri=source.uri,
                   corpus=source.corpus, date=source.date, title=source.title, tenant=source.tenant,
                   groups=source.groups, digest="0", size=len(data), media_type=ARTICLE_MEDIA_TYPE,
                   acquired_at="2026-01-01T00:00:00Z")
    return parse_revision(data, rev, MabillonSettings().parsing)


@pytest.fixture(scope="module")
def shared() -> tuple[dict[str, tuple], list[Quarantined]]:
    if not NEWSPAPERS.exists():
        pytest.skip(f"shared samples not found at {NEWSPAPERS}")
    return inputs(NEWSPAPERS / "europeana-bnf", NEWSPAPERS / "gallica")


@pytest.fixture
def bag(tmp_path: Path) -> Path:
    return news.make_package(tmp_path / "bag")


@needs_samples
def test_shared_samples_are_dated_titled_articles_with_their_identifiers(shared):
    found, quarantined = shared
    assert quarantined == []  # nothing of an undamaged package is refused
    assert {s.declared_media_type for s, _ in found.values()} == {ARTICLE_MEDIA_TYPE}
    assert {s.corpus for s, _ in found.values()} == {
        "le_gaulois", "le_journal_des_debats_politiques_et_litteraires", "oeuvre"}
    conference, _ = found["le_gaulois/1884-04-30/653/a001"]
    assert (conference.title, conference.date) == ("LA CONFÉRENCE", "1884-04-30")
    assert conference.metadata["identifiers"]["CatalogueIdentifier"] == "FRBNF32779904"
    assert conference.metadata["rights"] == "6 - Snippet view (image server)"
    assert conference.uri.endswith("18840430_02_1-METS.xml#DIVL10")
    # images listed by the METS but not delivered: recorded, not an error
    fixity = conference.metadata["package"]["fixity"]
    assert fixity["verified"] == 4 and "OCRmaster/18840430_02_1-0001.jp2" in fixity["not_delivered"]
    lettres, _ = found["oeuvre/1915-12-01/78/a001"]
    assert lettres.title == "Lettres du Front" and lettres.metadata["authors"] == ["Sergent Pangloss"]
    assert lettres.metadata["ark"] == "ark:/12148/bpt6k4616238h"
    assert lettres.metadata["title_ark"] == "ark:/12148/cb34429265b"
    assert lettres.metadata["page_images"] == {"1": "https://gallica.bnf.fr/iiif/ark:/12148/bpt6k4616238h/f1"}
    assert lettres.metadata["page_labels"] == {"1": "NP"}
    assert lettres.metadata["ocr"]["pages"]["1"]["ocr_brut"] == pytest.approx(82.11)
    # the table of contents arrived under another name than the manifest lists: found by checksum
    assert lettres.metadata["package"]["fixity"]["renamed"] == {"toc/M4616238.xml": "toc/T4616238.xml"}


@needs_samples
def test_an_article_over_two_pages_keeps_the_issue_page_numbers_and_pixel_boxes(shared):
    found, _ = shared
    source, data = found["le_gaulois/1884-04-30/653/a010"]
    assert source.metadata["pages"] == [1, 2]
    doc = parsed(source, data)
    assert [p.page_no for p in doc.pages] == [1, 2]
    two = doc.pages[1]
    assert (two.width, two.height) == (5402.0, 7328.0)
    assert "funérailles de Mme Paul Féval" in two.raw_text
    word = next(e for e in two.elements if e.kind == "word")
    assert word.bbox and 0 <= word.bbox[0] < word.bbox[2] <= two.width
    assert 0 < two.ocr_confidence < 1


@needs_samples
def test_text_outside_articles_is_kept_apart_per_page(shared):
    found, _ = shared
    masthead, data = found["le_gaulois/1884-04-30/653/p1"]
    assert masthead.metadata["kind"] == "outside_articles"
    articles_p1 = [parsed(s, d) for s, d in found.values()
                   if s.doc_id.startswith("le_gaulois/") and s.metadata["kind"] == "article" and 1 in s.metadata["pages"]]
    outside = parsed(masthead, data).pages[0].raw_text
    first_line = outside.split("\n")[0]
    assert first_line and not any(first_line in p.raw_text for d in articles_p1 for p in d.pages)


@needs_samples
def test_a_tampered_alto_refuses_its_whole_package_and_the_batch_goes_on(tmp_path: Path):
    copy = shutil.copytree(GAULOIS, tmp_path / "gaulois")
    page2 = copy / "ALTO" / "18840430_02_1-0002.xml"
    page2.write_bytes(page2.read_bytes().replace(b"meilleur", b"meilleure", 1))
    (tmp_path / "note.txt").write_text("Une note d'archiviste sur la livraison.")
    bag = news.make_package(tmp_path / "bag")
    found, quarantined = inputs(tmp_path)
    assert len(quarantined) == 1
    assert quarantined[0].reason.startswith("issue package refused: fixity: ALTO p.2 md5 mismatch")
    assert quarantined[0].uri.endswith("18840430_02_1-METS.xml")
    assert not any(d.startswith("le_gaulois/") for d in found)  # the whole package, not just page 2
    assert "note" in found and f"{news.PREFIX}/a001" in found and bag.exists()


@needs_samples
def test_a_gallica_package_ingested_alone_is_named_by_its_iiif_manifest_or_its_folder(tmp_path: Path):
    package = shutil.copytree(NEWSPAPERS / "gallica" / "Oeuvre" / "4616238", tmp_path / "Oeuvre" / "4616238")
    found, _ = inputs(package)
    assert {s.corpus for s, _ in found.values()} == {"oeuvre"}  # the folder it was filed under
    (package / "4616238.json").write_text(json.dumps({  # as a harvester fetches it beside the METS
        "@context": "http://iiif.io/api/presentation/2/context.json", "label": "L'Oeuvre",
        "metadata": [{"label": "Title", "value": "L'Oeuvre (Paris. 1904)"}]}))
    found, quarantined = inputs(package)
    assert quarantined == [] and "4616238" not in found  # the manifest is the package's, not a text
    lettres, _ = found["l_oeuvre/1915-12-01/78/a001"]
    assert (lettres.corpus, lettres.metadata["newspaper"]) == ("l_oeuvre", "L'Oeuvre")


def test_a_package_named_by_its_mets_or_a_list_of_its_files_is_one_package(bag: Path):
    mets, pages = bag / "data" / "mets.xml", sorted((bag / "data" / "alto").iterdir())
    whole, _ = inputs(bag)
    alone, quarantined = inputs(mets)
    assert quarantined == [] and digests(alone) == digests(whole)
    listed, quarantined = inputs(*pages, mets)  # the pages named before their METS: still one package
    assert quarantined == [] and digests(listed) == digests(whole)


def test_a_page_delivered_under_another_name_is_found_by_its_checksum(bag: Path):
    expected = digests(inputs(bag)[0])
    (bag / "data" / "alto" / "00002.xml.gz").rename(bag / "data" / "alto" / "page-2.xml.gz")
    found, quarantined = inputs(bag)
    assert quarantined == [] and digests(found) == expected  # read as page 2, not as a file of its own
    fixity = found[f"{news.PREFIX}/a001"][0].metadata["package"]["fixity"]
    assert fixity["renamed"] == {"alto/00002.xml.gz": "alto/page-2.xml.gz"}


@needs_samples
def test_ocr_gzipped_by_the_deliverer_is_checked_against_the_checksum_of_what_it_holds(tmp_path: Path):
    package = shutil.copytree(NEWSPAPERS / "gallica" / "Oeuvre" / "4616238", tmp_path / "Oeuvre" / "4616238")
    plain = package / "ocr" / "X0000002.xml"
    (package / "ocr" / "X0000002.xml.gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()  # the manifest lists ocr/X0000002.xml with the MD5 of the plain file
    found, quarantined = inputs(package)
    assert quarantined == [] and "oeuvre/1915-12-01/78/a001" in found
    assert any(2 in s.metadata["pages"] for s, _ in found.values())
    damaged = gzip.decompress((package / "ocr" / "X0000002.xml.gz").read_bytes()).replace(b"Chambre", b"Chambra", 1)
    (package / "ocr" / "X0000002.xml.gz").write_bytes(gzip.compress(damaged))
    found, quarantined = inputs(package)
    assert found == {} and quarantined[0].reason == (
        "issue package refused: fixity: ALTO p.2 md5 mismatch (ocr/X0000002.xml.gz, recorded in manifest.xml)")


def test_a_package_missing_one_of_its_alto_pages_waits_for_a_complete_delivery(bag: Path):
    (bag / "data" / "alto" / "00002.xml.gz").unlink()
    found, quarantined = inputs(bag)
    assert found == {} and quarantined[0].reason == (
        "issue package refused: ALTO p.2 (data/alto/00002.xml.gz) listed by the METS but not delivered: "
        "the issue is incomplete")


def test_a_bagit_manifest_is_checked_too(tmp_path: Path):
    bag = news.make_package(tmp_path / "bag", mets_checksums=False)
    page2 = bag / "data" / "alto" / "00002.xml.gz"
    page2.write_bytes(gzip.compress(gzip.decompress(page2.read_bytes()).replace(b"Tourouvre", b"Tourouve")))
    found, quarantined = inputs(bag)
    assert found == {}
    assert [q.reason for q in quarantined] == [
        "issue package refused: fixity: ALTO p.2 sha256 mismatch (data/alto/00002.xml.gz, recorded in manifest-sha256.txt)"]


def test_a_named_sha256_manifest_is_checked_and_a_malformed_page_refuses_its_package(tmp_path: Path):
    bag = news.make_package(tmp_path / "bag", mets_checksums=False)
    (bag / "manifest-sha256.txt").rename(bag / "orne_manifest.txt")  # a producer's own manifest name
    page2 = bag / "data" / "alto" / "00002.xml.gz"
    broken = gzip.compress(gzip.decompress(page2.read_bytes())[:-40])  # truncated mid-element
    page2.write_bytes(broken)
    found, quarantined = inputs(bag)
    assert found == {} and quarantined[0].reason.startswith("issue package refused: fixity: ALTO p.2 sha256 mismatch")
    (bag / "orne_manifest.txt").unlink()  # nothing records a checksum: the page is read, and refused
    found, quarantined = inputs(bag)
    assert found == {} and quarantined[0].reason.startswith(
        "issue package refused: ALTO p.2 (data/alto/00002.xml.gz): malformed ALTO XML")


def test_another_librarys_shape_alto_v4_mm10_gzipped_bagit_without_images(bag: Path):
    found, quarantined = inputs(bag)
    assert quarantined == []
    assert set(found) == {f"{news.PREFIX}/a001", f"{news.PREFIX}/a002", f"{news.PREFIX}/a003", f"{news.PREFIX}/p1"}
    foire, data = found[f"{news.PREFIX}/a001"]
    assert (foire.title, foire.date, foire.corpus) == ("La foire de Mortagne", news.DATE, "le_courrier_de_l_orne")
    meta = foire.metadata
    assert meta["authors"] == ["Jules Lemaître-Duval"] and meta["section"] == "Chronique régionale"
    assert meta["identifiers"]["urn"] == news.URN and meta["ark"] == "ark:/99999/orne42"
    assert meta["rights"] == "domaine public" and meta["pages"] == [1, 2]
    assert sorted(meta["package"]["fixity"]["not_delivered"]) == ["images/00001.tif", "images/00002.tif"]
    assert "page_images" not in meta  # no image service named
    assert found[f"{news.PREFIX}/a003"][0].title == "Nécrologie"  # the div's label where MODS has no title
    doc = parsed(foire, data)
    page1, page2 = doc.pages
    assert (page1.width, page1.height) == (news.px(2100), news.px(2970))  # mm10 → pixels at 300 dpi
    first = next(e for e in page1.elements if e.kind == "word")
    assert page1.raw_text[first.char_start:first.char_end] == "La"
    # below the two-line masthead: VPOS 320 mm10
    assert first.bbox == (news.px(100), news.px(320), news.px(140), news.px(370))
    assert "Ernestine Bellavoine" in page2.raw_text  # through the ComposedBlock the METS names
    assert news.MASTHEAD.split()[0] not in page1.raw_text.split()[:2]
    assert news.MASTHEAD in parsed(*found[f"{news.PREFIX}/p1"]).pages[0].raw_text.replace("\n", " ")
    assert 0.62 < meta["ocr"]["confidence"] < 0.95 and meta["ocr"]["pages"]["1"]["pc"] == 0.89


def test_the_same_package_twice_gives_the_same_bytes(tmp_path: Path):
    one = news.make_package(tmp_path / "one")
    two = news.make_package(tmp_path / "elsewhere" / "two")
    assert digests(inputs(one)[0]) == digests(inputs(two)[0])


def test_a_corrected_page_changes_only_the_articles_on_it(tmp_path: Path):
    before = digests(inputs(news.make_package(tmp_path / "v1"))[0])
    after = digests(inputs(news.make_package(tmp_path / "v2", corrected=True))[0])
    changed = {d for d in before if before[d] != after[d]}
    assert set(before) == set(after)
    assert changed == {f"{news.PREFIX}/a001", f"{news.PREFIX}/a003"}  # the two articles on page 2


def test_without_logical_structure_each_page_is_a_document(bag: Path):
    mets = bag / "data" / "mets.xml"
    mets.write_bytes(re.sub(rb'<mets:structMap TYPE="LOGICAL">.*</mets:structMap>', b"", mets.read_bytes()))
    (bag / "manifest-sha256.txt").unlink()  # the METS changed; its bag manifest would refuse it
    found, quarantined = inputs(bag)
    assert quarantined == []
    assert set(found) == {f"{news.PREFIX}/p1", f"{news.PREFIX}/p2"}
    assert {s.metadata["kind"] for s, _ in found.values()} == {"page"}


def test_a_sidecar_naming_the_mets_describes_every_article(bag: Path):
    (bag / "sidecar.json").write_text(json.dumps([{
        "file": "data/mets.xml", "corpus": "presse_ornaise", "tenant": "orne", "groups": ["lecteurs"],
        "valid_from": "2030-01-01", "fonds": "4 Mi 12"}]))
    found, quarantined = inputs(bag)
    assert quarantined == [] and len(found) == 4
    for source, _ in found.values():
        assert (source.corpus, source.tenant, source.groups) == ("presse_ornaise", "orne", ["lecteurs"])
        assert source.valid_from.year == 2030 and source.metadata["fonds"] == "4 Mi 12"


def test_a_mets_with_entities_is_refused_with_its_reason(bag: Path):
    mets = bag / "data" / "mets.xml"
    mets.write_bytes(mets.read_bytes().replace(b"<mets:mets ", b'<!DOCTYPE m [<!ENTITY x "y">]><mets:mets ', 1))
    found, quarantined = inputs(bag)
    assert [q.reason.split(":")[0] for q in quarantined] == ["issue package METS unreadable"]
    assert "entity" in quarantined[0].reason


@pytest.mark.parametrize("unit, factor", [("inch1200", 300 / 1200), ("pixel", 1.0)])
def test_alto_units_become_pixels(unit: str, factor: float):
    data = (f"<alto xmlns='http://www.loc.gov/standards/alto/ns-v2#'><Description><MeasurementUnit>{unit}"
            "</MeasurementUnit></Description><Layout><Page WIDTH='2400' HEIGHT='3600' PC='0.5'><PrintSpace>"
            "<TextBlock ID='B1'><TextLine><String CONTENT='Mairie' HPOS='120' VPOS='240' WIDTH='600' HEIGHT='120'"
            " WC='0.9'/><HYP CONTENT='-'/></TextLine></TextBlock></PrintSpace></Page></Layout></alto>").encode()
    page = read_alto_page(gzip.compress(data), max_bytes=LIMIT)
    assert (page.width, page.height, page.pc) == (2400 * factor, 3600 * factor, 0.5)
    line = page.blocks["B1"].lines[0]
    assert line.words[0].bbox == (120 * factor, 240 * factor, 720 * factor, 360 * factor) and line.hyphen == "-"


def test_a_gzip_that_is_not_alto_is_refused():
    with pytest.raises(AltoError, match="not ALTO"):
        read_alto_page(gzip.compress(b"<mets xmlns='http://www.loc.gov/METS/'/>"), max_bytes=LIMIT)


def test_a_gzipped_page_inflating_beyond_the_configured_limit_refuses_its_package_and_the_batch_goes_on(
        tmp_path: Path):
    """The package path inflates within `limits.max_bytes`, the lone file's limit: one setting."""
    bag = news.make_package(tmp_path / "bag", mets_checksums=False)
    (bag / "manifest-sha256.txt").unlink()  # nothing records a checksum: the page is read, and refused
    page2 = bag / "data" / "alto" / "00002.xml.gz"
    page2.write_bytes(gzip.compress(gzip.decompress(page2.read_bytes()) + b" " * LIMIT))  # still good ALTO
    (tmp_path / "note.txt").write_text("Une note d'archiviste sur la livraison.")
    found, quarantined = inputs(tmp_path, limits=InspectionLimits(max_bytes=LIMIT))
    assert [q.reason for q in quarantined] == [
        f"issue package refused: ALTO p.2 (bag/data/alto/00002.xml.gz): gzip bomb: inflates beyond the limit of {LIMIT} bytes"]
    assert quarantined[0].uri.endswith("data/mets.xml")
    assert set(found) == {"note"}  # the rest of the batch
    found, quarantined = inputs(tmp_path, limits=InspectionLimits(max_bytes=4 * LIMIT))  # a larger limit reads it
    assert quarantined == [] and f"{news.PREFIX}/a002" in found


def test_fixity_inflates_a_gzipped_delivery_within_the_configured_limit():
    """A page gzipped by the deliverer, whose METS records the checksum of what it holds, is
    hashed as it inflates: within the same limit, the file named in the reason."""
    plain = b"<alto/>" + b" " * LIMIT
    expected = Expected(path="ocr/X1.xml", algorithm="md5", digest=hashlib.md5(plain).hexdigest(),
                        what="ALTO p.1", source="manifest.xml")
    packed = gzip.compress(plain)
    with pytest.raises(FixityError, match=rf"^fixity: ALTO p.1 \(ocr/X1.xml.gz\): gzip bomb: .* {LIMIT} bytes$"):
        verify([expected], {"ocr/X1.xml.gz"}, lambda path: packed, LIMIT)
    report = verify([expected], {"ocr/X1.xml.gz"}, lambda path: packed, 2 * LIMIT)
    assert report.renamed == {"ocr/X1.xml": "ocr/X1.xml.gz"}
