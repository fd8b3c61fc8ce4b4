"""What a reader reads, in plain French (tasks/reading/wording.py): dates in words, titles that
are never empty, no server paths, the offline judges' cues said in French."""
from __future__ import annotations

import re

from tasks.reading.wording import (french_date, french_datetime, plain_cues, plain_why, reader_notes,
                                   reader_title, source_label, title_from_id)

LABELS = re.compile(r"fused|bridge|channels|entity|score|\bP 0\.|#\d|widened|None|too_few")


def test_dates_are_in_words_and_a_missing_date_is_left_out():
    assert french_date("1887-03-14") == "14 mars 1887"
    assert french_date("1793-11-01") == "1er novembre 1793"
    assert french_date("1887-08") == "août 1887"
    assert french_date("1887") == "1887"
    for missing in (None, "", "None", "s.d.", "1887-13-40"[:0]):
        assert french_date(missing) == ""
    assert french_date("1887-13-02") == "1887"  # an impossible month keeps the year only
    assert french_datetime("2026-12-06T01:26:49.5+00:00") == "6 décembre 2026 à 01:26 UTC"


def test_every_cue_of_the_offline_judges_is_said_in_french():
    rules = "entity Goblet, Floquet; bridge Paul Bert; date 1887-03-14 in 1887-03-13..1887-03-15; " \
            "2 channels agree; fused #1; widened date (score 4.5)"
    said = plain_cues(rules)
    assert said == ["nomme Goblet, Floquet", "nomme Paul Bert, relevé dans les pièces déjà retenues",
                    "daté du 14 mars 1887, dans la période cherchée",
                    "trouvé par plusieurs méthodes de recherche", "en tête des résultats",
                    "période élargie d'un jour ou deux"]
    for rationale in ("P 0.69; bridge Goblet; fused #1", "bm25 #2", "dense #3 (score 0.5)",
                      "date 1887-03-16 next to the range asked", "nothing matched (score 0.0)",
                      "not reviewed", "loop ended before review", "substring #1; fused #7"):
        line = plain_why([rationale])
        assert line and not LABELS.search(line), (rationale, line)
    # cut at the rationale's length limit in the middle of a cue: the cues before it stand
    assert plain_cues("P 0.71; entity Morin; fused #1; bridge Lhuil…") == [
        "pertinence estimée à 71 %", "nomme Morin", "en tête des résultats"]


def test_the_why_line_is_one_line_with_the_best_estimate_once():
    line = plain_why(["P 0.86; entity Floquet; 2 channels agree; fused #1",
                      "P 0.90; bridge Paul Bert; fused #1"], confirmations=2)
    assert line.startswith("Pertinence estimée à 90 %") and line.count("pertinence") == 0
    assert line.count(" ; ") <= 4 and line.endswith("retenu par 2 des recherches menées")


def test_an_llms_own_rationale_is_shown_as_written():
    assert plain_cues("Le registre nomme les deux commissaires.") is None
    assert plain_why(["Le registre nomme les deux commissaires."]) == "Le registre nomme les deux commissaires."
    assert plain_why([]) == ""


def test_a_title_is_never_empty_and_a_supplied_one_says_so():
    assert reader_title("Registre des délibérations", "x") == ("Registre des délibérations", False)
    assert reader_title(None, "1887-01-11_003_000", "PRÉSIDENCE DE M. PIERRE BLANC\n\nA deux heures") == (
        "PRÉSIDENCE DE M. PIERRE BLANC", True)
    # a first line of OCR noise is no title: the corpus and date, else the id in words
    assert reader_title(None, "1887-01-11_003_000", "l1 ;; 3 .. 4", "journal_officiel", "1887-01-11") == (
        "Journal officiel, 11 janvier 1887", True)
    assert reader_title("  ", "deliberations/saint-aubin-1887-03-14") == ("Saint-aubin, 14 mars 1887", True)
    assert title_from_id("lettre-prefet.pdf") == "Lettre-prefet"
    long = reader_title(None, "x", "Séance " + "très longue " * 20)[0]
    assert len(long) <= 91 and long.endswith("…")


def test_a_server_path_is_shown_by_its_file_name_only():
    assert source_label("file:///srv/mabillon/drop/registre%201793.png") == ("registre 1793.png", None)
    assert source_label("s3://archives-bucket/deliveries/b.pdf") == ("b.pdf", None)
    assert source_label("/home/ops/x.txt") == ("x.txt", None)
    url = "https://gallica.bnf.fr/ark:/12148/bpt6k7523393"
    assert source_label(url) == (url, url)
    assert source_label(None) == ("", None)


def test_flags_a_reader_should_know_are_said_and_the_others_kept_for_operators():
    notes = reader_notes(["lexical_index_rebuilt", "too_few_results", "degraded", "repeated_search"])
    assert len(notes) == 2 and all(not LABELS.search(n) for n in notes)
    assert reader_notes(["step_ceiling", "dense_exact_search_few_allowed_rows"]) == []
