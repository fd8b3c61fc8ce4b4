"""The official IIIF Image API validator (iiif-validator, from PyPI) against a scan served by a
real reading room on loopback: every test of compliance level 2 passes, and the level-3 tests of
what info.json claims beyond it (mirroring, the canonical and profile `Link` headers).

The validator knows one test image: 1000 × 1000 pixels, a 10 × 10 grid of 100-pixel squares whose
colours are its own table (`ValidationInfo.colorInfo[column][row]`). tests/reading/conftest.py
makes that image from the table and delivers it in the sample as libraries deliver scans: a PDF
page holding the image and an invisible text layer (a grid has no words for OCR to find, and a
scan without text is refused at ingest). The page is 480 points square, so the room's 150 dpi
serves it at the test image's 1000 pixels."""
from __future__ import annotations

import json

import pytest

from tests.reading.conftest import VALIDATOR_DOC, settings_of
from tests.reading.served import served_room

validator = pytest.importorskip("iiif_validator.validator",
                                reason="the IIIF validator is a test extra: pip install -e '.[test]'")

BEYOND_LEVEL_2 = ["rot_mirror", "rot_mirror_180", "linkheader_canonical", "linkheader_profile"]


def level_2_and_claimed() -> list[str]:
    listed = validator.TestSuite(validator.ValidationInfo()).list_tests("3.0")
    return sorted([name for name, info in listed.items() if info["level"] <= 2] + BEYOND_LEVEL_2)


def test_the_official_validator_passes_level_2_against_a_served_scan(sample_home):
    from tasks.reading.catalog import Catalog
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    settings = settings_of(sample_home)
    layout = StoreLayout.from_settings(settings)
    catalog = Catalog.load(layout, read_routing(layout).serving)
    image_id = f"{catalog.current[VALIDATOR_DOC]}-p0001"
    failures, passed = {}, []
    with served_room(settings) as url:  # anonymous: the validator sends no credentials
        for name in level_2_and_claimed():
            result = validator.ImageAPI(image_id, url.removeprefix("http://"), "iiif/3", "http", "",
                                        "3.0", debug=False)
            validator.TestSuite(validator.ValidationInfo()).run_test(name, result)
            if result.exception is not None:
                e = result.exception
                failures[name] = {"got": str(e.got), "expected": str(e.expected), "type": e.type,
                                  "message": e.message, "urls": result.urls[-2:]}
            else:
                passed.append(name)
    assert not failures, json.dumps(failures, indent=1)
    assert len(passed) == len(level_2_and_claimed()) >= 37  # 24 of levels 0-1, 9 of 2, 4 claimed
