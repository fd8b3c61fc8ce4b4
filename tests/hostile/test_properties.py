"""Property-based tests (hypothesis) of the parsers that read what an archivist hands over:
sidecar rows and files, JSONL record lines, and dates. Each property says what holds for
*every* input, not for the handful a person thought of: a refusal is a ValueError with a
reason (never another exception, which would fail the whole batch), and what is accepted is
what was meant."""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from pathlib import PurePosixPath

from hypothesis import HealthCheck, example, given, settings, strategies as st

from tasks.ingest.acquire import AccessDefaults, parse_record_line
from tasks.ingest.sidecar import SidecarError, entry_from_row, parse_sidecar
from tasks.markup import CONTROL
from tasks.query.tools import ToolError, check_args
from tasks.query.view import to_day

DEFAULTS = AccessDefaults(corpus="registres", tenant="t1", groups=("public",))
RUNS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
iso_dates = st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31))
names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
printable_names = names.filter(lambda s: s.strip() and not CONTROL.search(s))
controls = st.characters(min_codepoint=0, max_codepoint=0x9F).filter(lambda c: CONTROL.fullmatch(c)) \
    | st.sampled_from("\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


# ---- JSONL record lines ----------------------------------------------------------------------

@RUNS
@given(st.text(max_size=300))
@example("[" * 100_000)  # nesting deep enough to exhaust the JSON decoder's recursion
@example('{"doc_id": "a", "text": "\\ud800"}')  # a lone surrogate decodes but is not text
@example('{"doc_id": "a", "text": "x", "title": {"nested": 1}}')
def test_any_line_is_a_record_or_a_value_error(line):
    try:
        source, data = parse_record_line(line, DEFAULTS)
    except ValueError as exc:
        assert str(exc)  # a reason the quarantine can show
        return
    assert source.doc_id.strip() and json.loads(data)["doc_id"] == source.doc_id
    assert not CONTROL.search(source.doc_id)  # printable: it can be typed, listed and linked


@RUNS
@given(st.dictionaries(st.sampled_from(["doc_id", "text", "corpus", "date", "tenant", "groups",
                                        "title", "metadata", "extra"]), json_values, max_size=9))
def test_any_json_object_is_a_record_or_a_value_error(record):
    line = json.dumps(record)
    try:
        source, data = parse_record_line(line, DEFAULTS)
    except ValueError as exc:
        assert str(exc)
        return
    # accepted only with every access field well formed (the policy fails closed)
    assert isinstance(record["text"], str) and record["text"].strip()
    assert source.tenant and source.groups and all(isinstance(g, str) and g for g in source.groups)
    assert source.tenant == record.get("tenant", DEFAULTS.tenant)


@RUNS
@given(doc_id=printable_names, text=st.text(min_size=1).filter(str.strip),
       day=st.none() | iso_dates, groups=st.lists(names, min_size=1, max_size=3))
def test_a_well_formed_record_round_trips_and_its_bytes_are_canonical(doc_id, text, day, groups):
    record = {"doc_id": doc_id, "text": text, "groups": groups,
              **({"date": day.isoformat()} if day else {})}
    source, data = parse_record_line(json.dumps(record), DEFAULTS)
    assert (source.doc_id, source.corpus, source.date) == (doc_id, "registres", day.isoformat() if day else None)
    assert source.groups == sorted(set(groups))
    # the same record with its keys in another order is the same bytes, so the same revision
    again = parse_record_line(json.dumps(dict(reversed(list(record.items())))), DEFAULTS)[1]
    assert again == data


@RUNS
@given(before=st.text(max_size=8), control=controls, after=st.text(max_size=8))
def test_a_doc_id_holding_any_control_character_is_refused_naming_it(before, control, after):
    doc_id = before + control + after
    try:
        parse_record_line(json.dumps({"doc_id": doc_id, "text": "x"}), DEFAULTS)
    except ValueError as exc:
        reason = str(exc)
        assert not CONTROL.search(reason)  # the reason shows it escaped
        assert "holds control characters" in reason or not doc_id.strip(), reason
        return
    raise AssertionError(f"{doc_id!r} accepted")


# ---- dates -----------------------------------------------------------------------------------

@RUNS
@given(st.text(max_size=12) | st.from_regex(r"\A\d{4}-\d{2}-\d{2}\Z"))
@example("1887-02-29")
@example("today")
@example("NaT")
def test_record_dates_are_accepted_exactly_when_they_are_calendar_dates(text):
    def calendar(s):
        try:
            return len(s) == 10 and s[4] == "-" and s[7] == "-" and bool(dt.date.fromisoformat(s))
        except ValueError:
            return False
    try:
        source, _ = parse_record_line(json.dumps({"doc_id": "d", "text": "x", "date": text}), DEFAULTS)
        accepted = True
    except ValueError as exc:
        accepted = False
        assert "date" in str(exc)
    assert accepted == (calendar(text) and text.isascii() and text.replace("-", "").isdigit())


@RUNS
@given(iso_dates)
def test_query_days_agree_with_the_calendar(day):
    assert to_day(day.isoformat()) == (day - dt.date(1970, 1, 1)).days
    assert to_day(f"{day.isoformat()}T12:00:00") == to_day(day.isoformat())


@RUNS
@given(st.text(max_size=16))
@example("today")
@example("now")
@example("NaT")
@example("1887-01-011")
def test_query_days_never_raise_and_read_only_iso_dates(text):
    day = to_day(text)
    if day is not None:
        assert dt.date.fromisoformat(text[:10]) == dt.date(1970, 1, 1) + dt.timedelta(days=day)


@RUNS
@given(st.text(max_size=12), st.text(max_size=12))
def test_agent_date_arguments_are_dates_or_a_tool_error(lo, hi):
    try:
        args = check_args("date_range", {"date_from": lo, "date_to": hi}, ["c"])
    except ToolError as exc:
        assert str(exc)
        return
    assert dt.date.fromisoformat(args["date_from"]) <= dt.date.fromisoformat(args["date_to"])


# ---- sidecars --------------------------------------------------------------------------------

sidecar_values = st.none() | st.text(max_size=20) | st.integers() | st.lists(st.text(max_size=6), max_size=3)
rows = st.dictionaries(st.sampled_from(["file", "doc_id", "corpus", "date", "title", "tenant",
                                        "groups", "cote"]), sidecar_values, max_size=8)


# The refusals a row can get: each names the field and what is wrong with it.
ROW_REASON = re.compile(r"(?s)(doc_id|corpus|date|title|tenant|cote) must be a non-empty string"
                        r"|groups must be a list of strings|groups is empty|missing file"
                        r"|file .+ must be a path inside the folder|date .+ is not (YYYY-MM-DD|a calendar date)"
                        r"|doc_id '.+' holds control characters \(.+\): an id must be printable text; .+")


@RUNS
@given(rows)
@example({"file": "../../etc/passwd"})
@example({"file": "/etc/passwd"})
@example({"file": "a/../../b.pdf"})
@example({"file": "..\\..\\windows\\b.pdf"})
def test_a_sidecar_row_is_an_entry_inside_the_folder_or_a_value_error(row):
    try:
        entry = entry_from_row(row)
    except ValueError as exc:
        assert ROW_REASON.fullmatch(str(exc)), str(exc)  # a reason a person can act on, naming the field
        return
    path = PurePosixPath(entry.file)
    assert not path.is_absolute() and ".." not in path.parts  # never outside the folder
    assert entry.groups is None or (entry.groups and all(g.strip() == g and g for g in entry.groups))


@RUNS
@given(st.text(max_size=400))
@example("[" * 100_000)
def test_any_json_sidecar_text_parses_or_is_refused_whole(text):
    try:
        sidecar = parse_sidecar("sidecar.json", text)
    except SidecarError as exc:  # the refusal names the file and says what is wrong with it
        message = str(exc)
        try:
            json.loads(text)
        except json.JSONDecodeError:
            assert re.fullmatch(r"sidecar\.json is not valid JSON \(.+ at line \d+\)", message), message
        except RecursionError:
            assert message == "sidecar.json is JSON nested too deeply to be a list of rows", message
        else:
            assert message == "sidecar.json must be a JSON list of objects", message
        return
    assert all(reason.startswith("sidecar.json row ") for reason in sidecar.refused.values())


@RUNS
@given(st.text(max_size=400))
@example("file,title\na.txt," + "x" * 200_000)  # over csv's field size limit
@example("file,title\na.txt,x\0y\n")
def test_any_csv_sidecar_text_parses_or_is_refused_whole(text):
    try:
        sidecar = parse_sidecar("sidecar.csv", text)
    except SidecarError as exc:  # the refusal names the file and says what is wrong with it
        message = str(exc)
        try:
            header = csv.DictReader(io.StringIO(text)).fieldnames or []
        except csv.Error:
            header = None
        if header is not None and "file" not in header:
            assert message == "sidecar.csv has no 'file' column", message
        else:
            assert re.fullmatch(r"sidecar\.csv is not a readable CSV table \(line \d+: .+\)",
                                message, re.DOTALL), message
        return
    for entry in sidecar.entries.values():
        assert ".." not in PurePosixPath(entry.file).parts


@RUNS
@given(st.lists(st.fixed_dictionaries({"file": st.from_regex(r"\A[a-z]{1,6}/[a-z]{1,6}\.txt\Z"),
                                       "title": st.text(st.characters(blacklist_categories=("Cs", "Cc")),
                                                        max_size=30)}), max_size=6))
def test_json_and_csv_sidecars_say_the_same_thing(entries):
    as_json = parse_sidecar("sidecar.json", json.dumps(entries))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, ["file", "title"])
    writer.writeheader()
    writer.writerows(entries)
    as_csv = parse_sidecar("sidecar.csv", buffer.getvalue())
    assert set(as_json.entries) == set(as_csv.entries)
    assert set(as_json.refused) == set(as_csv.refused)
    for name, entry in as_json.entries.items():
        # CSV strips cells; an empty title is no title in both
        assert (entry.title or "").strip() == (as_csv.entries[name].title or "")
