"""A drop folder receiving files while a scheduled ingest runs: a file still being written is
not ingested half-written (its modification time is too recent, or it carries an uploader's
in-progress name), and the next run picks it up whole."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from flows.drop_folder import ScheduledIngestParams, scheduled_ingest, still_being_written
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tests.conftest import settings_for

COMPLETE = "Le conseil municipal vote l'achat d'une pompe à incendie pour le hameau. " * 4
GROWING = "Registre des naissances, commune de Rânes, année 1854. " * 40


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_recently_modified_files_are_the_ones_still_being_written(tmp_path):
    (tmp_path / "sub").mkdir()
    old, fresh = tmp_path / "ancien.txt", tmp_path / "sub" / "en-cours.txt"
    old.write_text("x")
    fresh.write_text("y")
    age(old, 120)
    assert still_being_written(str(tmp_path), 10) == [fresh.resolve().as_uri()]
    assert still_being_written(str(tmp_path), 0) == []
    assert still_being_written("s3://bucket/inbox/", 10) == []  # objects appear whole


def texts(home: Path, generation: str) -> dict[str, str]:
    layout = StoreLayout.from_settings(settings_for(home))
    revisions = {r["revision_id"]: r["doc_id"] for r in
                 read_lineage_table(layout, generation, "revisions").to_pylist() if r["is_current"]}
    return {revisions[p["revision_id"]]: p["raw_text"]
            for p in read_lineage_table(layout, generation, "pages").to_pylist() if p["revision_id"] in revisions}


@pytest.mark.slow
def test_a_file_being_written_is_left_for_the_next_run_and_then_ingested_whole(tmp_path, home):
    drop = tmp_path / "inbox"
    drop.mkdir()
    done = drop / "deliberation.txt"
    done.write_text(COMPLETE, "utf-8")
    age(done, 60)
    (drop / "upload.txt.part").write_text("Fragment d'un envoi inachevé", "utf-8")  # an uploader's temp name
    growing = drop / "naissances.txt"
    stop = threading.Event()

    def writer():  # a slow copy: a line every 50 ms until told to finish
        with growing.open("w", encoding="utf-8") as fh:
            while not stop.is_set():
                fh.write("Registre des naissances, commune de Rânes, année 1854. ")
                fh.flush()
                time.sleep(0.05)
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.3)
        settings = settings_for(home)
        first = scheduled_ingest(ScheduledIngestParams(drop_folder=str(drop), settle_s=5), settings=settings)
    finally:
        stop.set()
        thread.join()
    assert first.published
    served = texts(home, first.generation)
    assert set(served) == {"deliberation"}  # neither the growing file nor the .part
    growing.write_text(GROWING, "utf-8")  # the copy completes
    age(growing, 30)
    (drop / "upload.txt.part").rename(drop / "upload.txt")
    age(drop / "upload.txt", 30)
    second = scheduled_ingest(ScheduledIngestParams(drop_folder=str(drop), settle_s=5), settings=settings)
    served = texts(home, second.generation)
    assert set(served) == {"deliberation", "naissances", "upload"}
    assert served["naissances"] == GROWING  # whole, not the half written during the first run
