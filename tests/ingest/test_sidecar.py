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


def test_a_blank_value_says_nothing_in_json_as_in_csv():
    # a spreadsheet's blank cell is often spaces, in its CSV export as in its JSON one: either way
    # the row describes its file the same (no title; the defaults' tenant), and refuses nothing
    rows = [{"file": "a/a.txt", "title": " ", "tenant": "  ", "date": "1854-08-09 "}]
    as_json = parse_sidecar("sidecar.json", json.dumps(rows))
    as_csv = parse_sidecar("sidecar.csv", "file,title,tenant,date\na/a.txt, ,  ,1854-08-09 \n")
    assert as_json.refused == as_csv.refused == {}
    assert as_json.entries == as_csv.entries
    entry = as_json.entries["a/a.txt"]
    assert (entry.title, entry.tenant, entry.date) == (None, None, "1854-08-09")


def test_two_sidecars_in_one_folder_are_ambiguous(tmp_path):
    folder(tmp_path, {"sidecar.json": "[]", "sidecar.csv": "file\n"})
    with pytest.raises(SidecarError, match="keep one"):
        read_sidecar(tmp_path)


def walk_by_path(path: Path):
    """Inputs by doc_id, and refusals by path inside the walked folder."""
    quarantined: list = []
    inputs = {p.source.doc_id: p.source for p in iter_inputs([path], DEFAULTS, quarantined)}
    return inputs, {q.uri.removeprefix(path.resolve().as_uri() + "/"): q.reason for q in quarantined}


def test_each_subfolder_sidecar_describes_its_own_files_with_paths_relative_to_it(tmp_path):
    fonds = {"sidecar.json": json.dumps([{"file": "preface.txt", "corpus": "fonds-general", "tenant": "dept"}]),
             "preface.txt": "Préface.", "divers.txt": "Divers.",
             "serie-a/sidecar.json": json.dumps([
                 {"file": "acte.txt", "doc_id": "A/1", "corpus": "etat-civil", "date": "1854-08-09",
                  "tenant": "mairie", "groups": ["agents"]},
                 {"file": "2/acte.txt", "doc_id": "A/2", "corpus": "etat-civil"}]),
             "serie-a/acte.txt": "Acte.", "serie-a/2/acte.txt": "Acte deux.", "serie-a/sans-ligne.txt": "Rien.",
             "serie-b/sous-serie/sidecar.csv":
                 "file,doc_id,corpus,date,tenant,groups\nplan.txt,B/plan,cadastre,1901-02-03,cadastre,geometres;public\n",
             "serie-b/sous-serie/plan.txt": "Plan."}
    inputs, refused = walk_by_path(folder(tmp_path, fonds))
    assert refused == {}
    assert sorted(inputs) == ["A/1", "A/2", "B/plan", "divers", "preface", "serie-a/sans-ligne"]
    a1, a2, plan = inputs["A/1"], inputs["A/2"], inputs["B/plan"]
    assert (a1.corpus, a1.date, a1.tenant, a1.groups) == ("etat-civil", "1854-08-09", "mairie", ["agents"])
    assert (a2.corpus, a2.tenant, a2.groups) == ("etat-civil", "archives", ["public"])  # a row names no tenant
    assert (plan.corpus, plan.date, plan.tenant, plan.groups) == (
        "cadastre", "1901-02-03", "cadastre", ["geometres", "public"])
    assert (inputs["preface"].corpus, inputs["preface"].tenant) == ("fonds-general", "dept")
    for unnamed in ("divers", "serie-a/sans-ligne"):  # no sidecar names them: command-line defaults
        src = inputs[unnamed]
        assert (src.corpus, src.tenant, src.groups, src.date) == ("fonds", "archives", ["public"], None)


def test_the_nearest_sidecar_naming_a_file_wins_whole_and_farther_rows_still_apply_below(tmp_path):
    fonds = {"sidecar.json": json.dumps([
                 {"file": "serie-a/acte.txt", "corpus": "loin", "tenant": "loin", "title": "Titre lointain"},
                 {"file": "serie-a/lettre.txt", "corpus": "correspondance", "tenant": "prefecture"},
                 {"file": "serie-a/refuse.txt", "date": "1854-13-45"}]),
             "serie-a/sidecar.json": json.dumps([{"file": "acte.txt", "corpus": "pres"},
                                                 {"file": "refuse.txt", "corpus": "pres"},
                                                 {"file": "lettre-bis.txt", "groups": []}]),
             "serie-a/acte.txt": "Acte.", "serie-a/lettre.txt": "Lettre.", "serie-a/refuse.txt": "R.",
             "serie-a/lettre-bis.txt": "Bis."}
    inputs, refused = walk_by_path(folder(tmp_path, fonds))
    acte = inputs["serie-a/acte"]
    # the nearer row applies as a whole: no tenant or title borrowed from the farther row
    assert (acte.corpus, acte.tenant, acte.title) == ("pres", "archives", "acte")
    lettre = inputs["serie-a/lettre"]  # the nearer sidecar does not name it: the farther row applies
    assert (lettre.corpus, lettre.tenant) == ("correspondance", "prefecture")
    assert inputs["serie-a/refuse"].corpus == "pres"  # the farther sidecar's refusal is overridden
    # refusals work at each level, and say which sidecar refused
    assert refused == {"serie-a/lettre-bis.txt": "serie-a/sidecar.json row 3: groups is empty"}


def test_an_unreadable_subfolder_sidecar_refuses_only_its_subtree(tmp_path):
    fonds = {"sidecar.json": json.dumps([{"file": "serie-a/acte.txt", "corpus": "etat-civil"},
                                         {"file": "lettre.txt", "corpus": "corr"}]),
             "lettre.txt": "Lettre.", "serie-b/plan.txt": "Plan.",
             "serie-a/sidecar.json": "[{oops", "serie-a/acte.txt": "Acte.",
             "serie-a/sous-serie/sidecar.csv": "file,corpus\nnote.txt,notes\n", "serie-a/sous-serie/note.txt": "N.",
             "serie-c/sidecar.json": "[]", "serie-c/sidecar.csv": "file\n", "serie-c/x.txt": "X."}
    inputs, refused = walk_by_path(folder(tmp_path, fonds))
    assert sorted(inputs) == ["lettre", "serie-b/plan"] and inputs["lettre"].corpus == "corr"
    assert set(refused) == {"serie-a/acte.txt", "serie-a/sous-serie/note.txt", "serie-c/x.txt"}
    assert refused["serie-a/acte.txt"].startswith("sidecar unreadable: serie-a/sidecar.json is not valid JSON")
    assert refused["serie-a/sous-serie/note.txt"] == refused["serie-a/acte.txt"]  # deeper sidecars too
    assert refused["serie-c/x.txt"] == ("sidecar unreadable: both serie-c/sidecar.json and "
                                        "serie-c/sidecar.csv are present; keep one")


def test_a_subfolder_sidecar_row_naming_a_missing_file_is_reported_at_its_path(tmp_path):
    fonds = {"serie-a/sidecar.csv": "file,date\nabsent.txt,1854-08-09\nacte.txt,1854-08-09\n",
             "serie-a/acte.txt": "Acte.", ".cache/sidecar.json": "[{oops", ".cache/x.txt": "X."}
    inputs, refused = walk_by_path(folder(tmp_path, fonds))
    assert list(inputs) == ["serie-a/acte"] and inputs["serie-a/acte"].date == "1854-08-09"
    assert refused == {"serie-a/absent.txt": "serie-a/sidecar.csv names absent.txt, which is not in the folder"}
