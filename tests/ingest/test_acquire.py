from pathlib import Path

from schemas.generation import Quarantined
from tasks.ingest.acquire import AccessDefaults, acquire_one, iter_inputs, parse_record_line
from tasks.store.layout import StoreLayout

DEFAULTS = AccessDefaults(corpus=None, tenant="default", groups=("public",))


def test_bad_lines_are_reported_by_number_and_the_rest_ingested(tmp_path: Path):
    export = tmp_path / "x.jsonl"
    export.write_text(
        '{"doc_id": "a", "corpus": "c", "date": "1887-01-01", "text": "Premier."}\n'
        'not json at all\n'
        '{"doc_id": "b", "corpus": "c", "date": "1887-02-30", "text": "Date impossible."}\n'
        '{"doc_id": "c", "corpus": "c", "text": ""}\n'
        '{"doc_id": "d", "corpus": "c", "date": "1887-01-04", "text": "Quatrième."}\n', "utf-8")
    quarantined: list[Quarantined] = []
    inputs = list(iter_inputs([export], DEFAULTS, quarantined))
    assert [i.source.doc_id for i in inputs] == ["a", "d"]
    assert [q.line for q in quarantined] == [2, 3, 4]
    assert "not valid JSON" in quarantined[0].reason
    assert "not a calendar date" in quarantined[1].reason
    assert "empty text" in quarantined[2].reason


def test_duplicate_doc_id_in_one_export_is_quarantined(tmp_path: Path):
    export = tmp_path / "x.jsonl"
    line = '{"doc_id": "a", "corpus": "c", "text": "Texte."}\n'
    export.write_text(line + line, "utf-8")
    quarantined: list[Quarantined] = []
    assert len(list(iter_inputs([export], DEFAULTS, quarantined))) == 1
    assert "duplicate doc_id" in quarantined[0].reason and quarantined[0].line == 2


def test_record_access_metadata_defaults_and_validation():
    src, _ = parse_record_line('{"doc_id": "a", "corpus": "c", "text": "t"}', DEFAULTS)
    assert (src.tenant, src.groups) == ("default", ["public"])
    src, _ = parse_record_line('{"doc_id": "a", "corpus": "c", "text": "t", "tenant": "t-b", '
                               '"groups": ["g2", "g1"]}', DEFAULTS)
    assert (src.tenant, src.groups) == ("t-b", ["g1", "g2"])
    for bad in ('"groups": []', '"groups": "public"', '"tenant": ""'):
        try:
            parse_record_line('{"doc_id": "a", "corpus": "c", "text": "t", %s}' % bad, DEFAULTS)
        except ValueError:
            continue
        raise AssertionError(f"accepted invalid access metadata {bad}")


def test_same_bytes_same_revision_new_bytes_new_revision(tmp_path: Path):
    layout = StoreLayout(tmp_path / "w", tmp_path / "m").ensure()
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    f = folder / "sub" / "note.txt"
    f.write_text("Procès-verbal de la séance.", "utf-8")
    first = [acquire_one(layout, i) for i in iter_inputs([folder], DEFAULTS, [])]
    again = [acquire_one(layout, i) for i in iter_inputs([folder], DEFAULTS, [])]
    assert first[0].doc_id == "sub/note"
    assert first[0].revision_id == again[0].revision_id
    assert layout.blob_path(first[0].digest).read_bytes() == f.read_bytes()
    f.write_text("Procès-verbal de la séance, corrigé.", "utf-8")
    changed = [acquire_one(layout, i) for i in iter_inputs([folder], DEFAULTS, [])]
    assert changed[0].revision_id != first[0].revision_id
    assert changed[0].source_id == first[0].source_id
