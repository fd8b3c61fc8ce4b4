"""Every archive format through the real release flow and CLI: a mixed folder with refusals."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.make_sample import SAMPLE_DIR, make_sample
from tasks.store.layout import StoreLayout
from tasks.store.lineage_query import document_lineage
from tests.conftest import settings_for

pytestmark = pytest.mark.slow

EXPECTED_PARSERS = {
    "deliberations/saint-aubin-1887-03-14": "plaintext/utf-8",
    "deliberations/vaux-le-moutier-an-2-brumaire-22": "tesseract/fra",  # PNG scan
    "doleances/champsecret-1789": "tesseract/fra",  # scanned PDF
    "correspondance/prefet-orne-1871-02-03": "pymupdf-text",  # digital PDF
    "correspondance/note-classement-1952-06-12": "docling-docx",
    "affiches/tourouvre-elections-1848": "tesseract/fra",  # JPEG scan
    "etat-civil/ranes-naissance-1854-08-09": "tesseract/fra",  # TIFF, turned 1°, noisy
    "presse/courrier-longny-1902-11-15": "alto",
    "inventaires/bellou-sur-huisne-1911": "docling-html",
}
SCAN = "deliberations/vaux-le-moutier-an-2-brumaire-22"


def mabillon(home: Path, *args: str, prefect: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, MABILLON_RUNNER="local", **(prefect or {}))
    return subprocess.run([sys.executable, "-m", "flows.cli", *args, "--home", str(home)], env=env,
                          capture_output=True, text=True, timeout=900, check=True)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, cli_prefect) -> tuple[Path, dict]:
    """The bundled sample with its refusals, ingested through the CLI on the local runner.

    What these tests check (each format's parser, the refusals, lineage) is the same code on
    either runner; parsing on Dask workers is tested where the runner matters: OCR pages and a
    first ingest in tests/flows/test_release.py, crashes in test_dask_runner.py, a worker killed
    through the CLI in test_crash_safety.py."""
    folder = tmp_path_factory.mktemp("inbox") / "sample"
    make_sample(folder, with_refusals=True)
    home = tmp_path_factory.mktemp("home")
    result = json.loads(mabillon(home, "ingest", str(folder), "--json", prefect=cli_prefect.client_env()).stdout)
    assert result["run"]["runner"] == "local"
    return home, result


def lineage(home: Path, doc_id: str) -> dict:
    return json.loads(mabillon(home, "lineage", doc_id, "--json").stdout)


def test_refused_files_are_quarantined_with_reasons_and_the_rest_is_published(ingested):
    _, result = ingested
    reasons = {Path(q["uri"]).name: q["reason"] for q in result["quarantined"]}
    assert set(reasons) == {"confidentiel.pdf", "vide.txt", "photo.jpg"}
    assert reasons["confidentiel.pdf"].startswith("encrypted PDF")
    assert reasons["vide.txt"].startswith("empty file")
    assert reasons["photo.jpg"].startswith("disguised file")
    assert result["serving"] and result["counts"]["sources"] == len(EXPECTED_PARSERS)
    assert result["counts"]["chunks"] == result["counts"]["vectors"] > 0


def test_every_format_is_parsed_by_its_parser_with_sidecar_metadata(ingested):
    home, _ = ingested
    sidecar = {row["doc_id"]: row for row in json.loads((SAMPLE_DIR / "sidecar.json").read_text())}
    assert set(sidecar) == set(EXPECTED_PARSERS)
    layout = StoreLayout.from_settings(settings_for(home))
    for doc_id, parser in EXPECTED_PARSERS.items():
        info = document_lineage(layout, "g0001", doc_id)  # in process: the CLI is tested below
        assert [p["parser"] for p in info["pages"]] == [parser], doc_id
        assert info["source"]["corpus"] == sidecar[doc_id]["corpus"]
        assert info["revisions"][-1]["date"] == sidecar[doc_id]["date"]
        assert info["chunks"], doc_id


def test_lineage_of_a_scan_shows_ocr_pages_and_chunks_with_page_and_box(ingested):
    home, _ = ingested
    info = lineage(home, SCAN)
    page = info["pages"][0]
    assert page["parser"] == "tesseract/fra" and 0.5 < page["ocr_confidence"] <= 1 and page["dpi"] == 300
    for chunk in info["chunks"]:
        x0, y0, x1, y1 = chunk["bbox"]
        assert chunk["page"] == 1 and 0 <= x0 < x1 <= page["width"] and 0 <= y0 < y1 <= page["height"]
    human = mabillon(home, "lineage", SCAN).stdout
    assert "tesseract/fra" in human and "OCR confidence" in human and "bbox" in human
