"""The full shared 1887 corpus through the release (slow: embeds ~3,800 chunks)."""
import json
import subprocess
import sys

import pytest

from schemas.settings import PROJECT_ROOT
from tasks.store.layout import StoreLayout
from tasks.store.lineage_query import chunk_join_report
from tasks.store.routing import read_routing
from tests.conftest import SHARED_CORPUS, settings_for

pytestmark = pytest.mark.slow


def test_whole_corpus_publishes_with_lineage_for_every_doc_id(shared_corpus_home):
    layout = StoreLayout.from_settings(settings_for(shared_corpus_home))
    serving = read_routing(layout).serving
    doc_ids = [json.loads(line)["doc_id"] for line in SHARED_CORPUS.open(encoding="utf-8")]
    from tasks.store.lineage_store import read_lineage_table

    sources = read_lineage_table(layout, serving, "sources")
    assert sorted(sources["doc_id"].to_pylist()) == sorted(doc_ids)
    join = chunk_join_report(layout, serving)
    assert join["chunks"] == join["with_revision"] == join["with_source"] > len(doc_ids)

    for doc_id in (doc_ids[0], doc_ids[len(doc_ids) // 2], doc_ids[-1]):
        out = subprocess.run([sys.executable, "-m", "flows.cli", "lineage", doc_id, "--json",
                              "--home", str(shared_corpus_home)], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, check=True)
        info = json.loads(out.stdout)
        assert info["source"]["doc_id"] == doc_id
        digest = info["revisions"][0]["digest"]
        assert len(digest) == 64 and (layout.blob_path(digest)).exists()
        record = json.loads(layout.blob_path(digest).read_text("utf-8"))
        assert record["doc_id"] == doc_id
        assert info["chunks"] and all(c["char_end"] > c["char_start"] for c in info["chunks"])
        # offsets index the raw text of the record
        first = info["chunks"][0]
        assert record["text"][first["char_start"]:first["char_end"]].split()[0] in first["text"]
