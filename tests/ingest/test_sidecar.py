"""Sidecar metadata in folders: applied to the files it names, refusing files it describes wrongly."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.ingest.acquire import AccessDefaults, iter_inputs
from tasks.ingest.sidecar import SidecarError, parse_sidecar, read_sidecar

DEFAULTS = AccessDefaults(corpus="fonds", tenant="archives", groups=("public",))


def folder(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def walk(path: Path):
    quarantined: list = []
    inputs = {p.source.doc_id: p.source for p in iter_inputs([path], DEFAULTS, quarantined)}
    return inputs, {Path(q.uri).name: q.reason for q in quarantined}


def test_json_sidecar_names_and_describes_files_others_get_defaults(tmp_path):
    sidecar = [{"file": "a/acte.txt", "doc_id": "etat-civil/1854-12", "corpus": "etat-civil",
                "date": "1854-08-09", "title": "Acte de naissance", "tenant": "mairie",
                "groups": ["agents", "archivistes"], "cote": "E 12"}]
    path = folder(tmp_path, {"a/acte.txt": "Acte.", "lettre.txt": "Lettre.",
                             "sidecar.json": json.dumps(sidecar)})
    inputs, refused = walk(path)
    assert refused == {}
    acte = inputs["etat-civil/1854-12"]
    assert (acte.corpus, acte.date, acte.title, acte.tenant, acte.groups) == (
        "etat-civil", "1854-08-09", "Acte de naissance", "mairie", ["agents", "archivistes"])
    assert acte.metadata == {"cote": "E 12"}
    lettre = inputs["lettre"]
    assert (lettre.corpus, lettre.tenant, lettre.groups, lettre.date) == ("fonds", "archives", ["public"], None)


def test_csv_sidecar_with_groups_separated_by_semicolons(tmp_path):
    path = folder(tmp_path, {"acte.txt": "Acte.", "sidecar.csv":
                             "file,doc_id,corpus,date,groups\nacte.txt,ec-1,etat-civil,1854-08-09,agents; maires\n"})
    inputs, refused = walk(path)
    assert refused == {} and inputs["ec-1"].groups == ["agents", "maires"]
    assert inputs["ec-1"].corpus == "etat-civil"


def test_a_wrong_row_refuses_its_file_and_the_batch_goes_on(tmp_path):
    sidecar = [{"file": "acte.txt", "date": "1854-13-45"}, {"file": "lettre.txt", "corpus": "corr"}]
    path = folder(tmp_path, {"acte.txt": "Acte.", "lettre.txt": "Lettre.", "sidecar.json": json.dumps(sidecar)})
    inputs, refused = walk(path)
    assert list(inputs) == ["lettre"]
    assert refused == {"acte.txt": "sidecar.json row 1: date '1854-13-45' is not a calendar date"}


def test_an_unreadable_sidecar_refuses_every_file_of_its_folder(tmp_path):
    path = folder(tmp_path, {"acte.txt": "Acte.", "lettre.txt": "Lettre.", "sidecar.json": "[{oops"})
    inputs, refused = walk(path)
    assert inputs == {}
    assert set(refused) == {"acte.txt", "lettre.txt"}
    assert all(r.startswith("sidecar unreadable: sidecar.json is not valid JSON") for r in refused.values())


def test_missing_files_repeated_rows_and_duplicate_doc_ids_are_reported(tmp_path):
    sidecar = [{"file": "absent.txt"}, {"file": "acte.txt", "doc_id": "x"}, {"file": "acte.txt", "doc_id": "y"},
               {"file": "b.txt", "doc_id": "lettre"}]
    path = folder(tmp_path, {"acte.txt": "A.", "b.txt": "B.", "lettre.txt": "L.",
                             "sidecar.json": json.dumps(sidecar)})
    inputs, refused = walk(path)
    assert list(inputs) == ["lettre"]
    assert "absent.txt, which is not in the folder" in refused["absent.txt"]
    assert "described twice" in refused["acte.txt"]
    assert "duplicate doc_id 'lettre'" in refused["lettre.txt"]


@pytest.mark.parametrize("row, reason", [
    ({"file": "../etc/passwd"}, "inside the folder"),
    ({"doc_id": "x"}, "missing file"),
    ({"file": "a.txt", "groups": []}, "groups is empty"),
    ({"file": "a.txt", "tenant": 3}, "tenant must be a non-empty string"),
])
def test_row_validation(row, reason):
    sidecar = parse_sidecar("sidecar.json", json.dumps([row]))
    assert not sidecar.entries and reason in next(iter(sidecar.refused.values()))


def test_two_sidecars_in_one_folder_are_ambiguous(tmp_path):
    folder(tmp_path, {"sidecar.json": "[]", "sidecar.csv": "file\n"})
    with pytest.raises(SidecarError, match="keep one"):
        read_sidecar(tmp_path)
