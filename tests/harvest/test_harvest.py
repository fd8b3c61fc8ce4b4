"""Harvesting Gallica through real HTTP, against the loopback fake Gallica (tests/harvest/fake_gallica.py):
spaced requests, 429/503 waited out, a server error quarantines its issue only, a killed harvest
resumes without fetching again what it had."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schemas.harvest import GallicaSettings, HarvestRequest
from tasks.harvest.harvest import harvest
from tests.harvest.fake_gallica import FakeGallica

OEUVRE = "ark:/12148/bpt6k4616238h"
GAULOIS = "bpt6ktest18840430"
ALL_ISSUES = 'sru:dc.title all "e"'  # the three titles of the fake all hold an "e"
INTERVAL = 0.2  # the tests' spacing; the default stays one request a second
JITTER = 0.04  # s: how much later than sent a loaded machine may deliver a request to the fake
UA = "Mabillon/test (archival ingest harvester; contact: archives@example.org)"


@pytest.fixture
def fake():
    with FakeGallica() as server:
        yield server


def polite(fake: FakeGallica, **overrides) -> GallicaSettings:
    return GallicaSettings(**{"base_url": fake.base_url, "min_interval_s": INTERVAL, "backoff_s": 0.05,
                              "contact": "archives@example.org", **overrides})


def test_requests_are_spaced_by_the_interval_and_name_the_project(fake, tmp_path):
    report = harvest(HarvestRequest.from_reference(OEUVRE), polite(fake), tmp_path, UA)
    assert [i.pages for i in report.issues] == [4] and not report.quarantined
    assert report.requests == len(fake.log) == 8  # OAIRecord, Pagination, manifest, Toc, 4 ALTO
    arrivals = [entry.at for entry in fake.log]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    # Measured by the server, where a request arrives a little after the client started it: each
    # gap within the arrival jitter (JITTER) of the interval, and the whole run at least
    # (n - 1) intervals long, as jitter does not add up. Unspaced, the gaps are ~1 ms.
    assert min(gaps) >= INTERVAL - JITTER, gaps
    assert arrivals[-1] - arrivals[0] >= (len(arrivals) - 1) * INTERVAL - JITTER
    assert {entry.user_agent for entry in fake.log} == {UA}
    assert GallicaSettings().min_interval_s == 1.0


def test_the_package_folder_has_the_spar_shape_with_checksums_arks_and_image_services(fake, tmp_path):
    from tasks.harvest.gallica import parse_xml

    report = harvest(HarvestRequest.from_reference(OEUVRE), polite(fake, min_interval_s=0), tmp_path, UA)
    folder = Path(report.issues[0].folder)
    shared = Path(__file__).resolve().parents[3] / "shared" / "newspapers" / "gallica" / "Oeuvre" / "4616238"
    assert sorted(p.name for p in (folder / "ocr").iterdir()) == [f"X000000{n}.xml" for n in range(1, 5)]
    assert (folder / "ocr" / "X0000002.xml").read_bytes() == (shared / "ocr" / "X0000002.xml").read_bytes()
    assert (folder / "toc" / "Tbpt6k4616238h.xml").read_bytes() == (shared / "toc" / "T4616238.xml").read_bytes()
    mets = (folder / "manifest.xml").read_bytes()
    root = parse_xml(mets, "mets")
    text = mets.decode()
    assert "ark:/12148/bpt6k4616238h" in text and "ark:/12148/cb34429265b" in text
    assert "<dc:date>1915-12-01</dc:date>" in text and "<dc:title>L'Œuvre</dc:title>" in text
    import hashlib
    checksums = {f.get("ID"): f.get("CHECKSUM") for f in root.iter("{http://www.loc.gov/METS/}file")}
    assert checksums["ocr.2"] == hashlib.md5((shared / "ocr" / "X0000002.xml").read_bytes()).hexdigest()
    services = [loc.get("{http://www.w3.org/1999/xlink}href") for f in root.iter("{http://www.loc.gov/METS/}fileGrp")
                if f.get("USE") == "iiif" for loc in f.iter("{http://www.loc.gov/METS/}FLocat")]
    assert services == [f"https://gallica.bnf.fr/iiif/ark:/12148/bpt6k4616238h/f{n}" for n in range(1, 5)]
    labels = [d.get("ORDERLABEL") for d in root.iter("{http://www.loc.gov/METS/}div") if d.get("TYPE") == "object"]
    assert labels == ["NP", "2", "3", "4"]  # the printed page numbers Pagination gave


def test_a_429_and_a_503_are_waited_out_for_their_retry_after(fake, tmp_path):
    fake.answer_next(429, retry_after="1")
    fake.answer_next(503, retry_after="1")
    report = harvest(HarvestRequest.from_reference(OEUVRE), polite(fake), tmp_path, UA)
    assert len(report.issues) == 1 and not report.quarantined
    first, second, third = fake.log[:3]
    assert [first.status, second.status, third.status] == [429, 503, 200]
    assert first.path == second.path == third.path
    assert second.at - first.at >= 1 - JITTER and third.at - second.at >= 1 - JITTER  # Retry-After: 1 honoured
    assert report.requests == 10  # the two refusals, then the issue's eight


def test_a_server_error_quarantines_that_issue_only(fake, tmp_path):
    fake.fail_issue(GAULOIS, 500)
    report = harvest(HarvestRequest.from_reference(ALL_ISSUES), polite(fake, min_interval_s=0.02, retries=2),
                     tmp_path, UA)
    assert [q.ark for q in report.quarantined] == [f"ark:/12148/{GAULOIS}"]
    assert "server error 500" in report.quarantined[0].reason and "3 tries" in report.quarantined[0].reason
    assert sorted(i.ark for i in report.issues) == ["ark:/12148/bpt6k4616238h", "ark:/12148/bpt6ktest18210801"]
    failed = [e for e in fake.log if GAULOIS in e.path]
    assert len(failed) == 3 and {e.status for e in failed} == {500}  # bounded: the first request, 2 retries
    assert not (tmp_path / "harvest" / "packages" / GAULOIS).exists()


def test_a_malformed_answer_is_retried_then_quarantines_its_issue(fake, tmp_path):
    fake.malform_issue(GAULOIS)
    report = harvest(HarvestRequest.from_reference(ALL_ISSUES), polite(fake, min_interval_s=0.02, retries=1),
                     tmp_path, UA)
    assert [q.ark for q in report.quarantined] == [f"ark:/12148/{GAULOIS}"]
    assert "malformed answer" in report.quarantined[0].reason
    assert len(report.issues) == 2


def test_a_title_and_date_range_harvests_the_issues_listed_inside_it(fake, tmp_path):
    settings = polite(fake, min_interval_s=0)
    none = harvest(HarvestRequest.from_reference("ark:/12148/cb34429265b", *map(_d, ("1915-11-01", "1915-11-30"))),
                   settings, tmp_path, UA)
    assert none.issues == [] and [e.path for e in fake.log] == [
        "/services/Issues?ark=ark%3A%2F12148%2Fcb34429265b%2Fdate&date=1915"]
    december = harvest(HarvestRequest.from_reference("https://gallica.bnf.fr/ark:/12148/cb34429265b/date191512"),
                       settings, tmp_path, UA)
    assert [(i.ark, str(i.date)) for i in december.issues] == [(OEUVRE, "1915-12-01")]
    assert december.requests == 8  # the year's list of a past year was kept: not asked again


def test_a_rerun_asks_only_the_search_again_and_leaves_the_packages_as_they_were(fake, tmp_path):
    settings = polite(fake, min_interval_s=0)
    first = harvest(HarvestRequest.from_reference(ALL_ISSUES), settings, tmp_path, UA)
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "harvest" / "packages").rglob("*") if p.is_file()}
    fake.log.clear()
    again = harvest(HarvestRequest.from_reference(ALL_ISSUES), settings, tmp_path, UA)
    assert [e.path.split("?")[0] for e in fake.log] == ["/SRU"]  # a search is asked again, nothing else
    assert again.from_cache == first.requests - 1 == 24
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def _d(text: str):
    from datetime import date

    return date.fromisoformat(text)


# slow: two `mabillon harvest` processes, one SIGKILLed mid-harvest (~60 s; make test runs it)
@pytest.mark.slow
def test_a_killed_harvest_resumes_without_fetching_again_what_it_had(fake, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]),
               MABILLON_GALLICA__BASE_URL=fake.base_url, MABILLON_GALLICA__MIN_INTERVAL_S=str(INTERVAL),
               MABILLON_GALLICA__CONTACT="archives@example.org")
    command = [sys.executable, "-m", "flows.cli", "harvest", ALL_ISSUES, "--home", str(tmp_path / "home")]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while sum(e.status == 200 for e in fake.log) < 12:  # mid-harvest: in the second issue
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the harvest did not get going"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
    first = [e.path for e in fake.log if e.status == 200 and not e.path.startswith("/SRU")]
    fake.log.clear()
    done = subprocess.run(command + ["--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "harvest 3/3" in done.stderr  # progress, one line an issue, on stderr
    second = [e.path for e in fake.log if not e.path.startswith("/SRU")]
    # The answer in flight at the kill may not have reached the cache: at most that one again.
    assert set(second) & set(first) <= {first[-1]}
    assert len(set(first) | set(second)) == 24  # every answer of the three issues, each once
    packages = tmp_path / "home" / "harvest" / "packages"
    assert sorted(p.name for p in packages.iterdir() if not p.name.startswith(".")) == [
        "bpt6k4616238h", "bpt6ktest18210801", "bpt6ktest18840430"]


def test_two_harvests_of_one_home_take_turns_and_keep_the_pace_together(fake, tmp_path):
    import threading

    settings = polite(fake, min_interval_s=0.1)
    reports = []
    threads = [threading.Thread(target=lambda ref=ref: reports.append(harvest(
        HarvestRequest.from_reference(ref), settings, tmp_path, UA))) for ref in (OEUVRE, "ark:/12148/" + GAULOIS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(len(r.issues) for r in reports) == [1, 1] and len(fake.log) == 16
    arrivals = [entry.at for entry in fake.log]
    # one after the other, never interleaved: each harvest's eight requests are contiguous
    names = [GAULOIS in e.path for e in fake.log]
    assert names in ([False] * 8 + [True] * 8, [True] * 8 + [False] * 8)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:8])] + [b - a for a, b in zip(arrivals[8:], arrivals[9:])]
    assert min(gaps) >= 0.1 - JITTER, gaps
    assert arrivals[7] - arrivals[0] >= 7 * 0.1 - JITTER and arrivals[15] - arrivals[8] >= 7 * 0.1 - JITTER
