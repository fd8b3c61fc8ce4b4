import numpy as np
import pyarrow as pa

from schemas.lineage import CHUNK_SCHEMA
from tasks.ingest.validate import ExpectationSpec, ValidationPolicy, validate_staged


def _chunks(n: int, **override) -> pa.Table:
    rows = [{"chunk_id": f"c{i}", "revision_id": "r", "source_id": "s", "doc_id": "d", "corpus": "c",
             "date": "1887-01-01", "tenant": "default", "groups": ["public"], "ordinal": i,
             "text": f"texte {i}", "n_tokens": 3, "char_start": 10 * i, "char_end": 10 * i + 7,
             "page_start": 1, "page_end": 1, "spans_json": "[]", "segmenter": "s"} for i in range(n)]
    for k, v in override.items():
        rows[-1][k] = v
    return pa.Table.from_pylist(rows, schema=CHUNK_SCHEMA)


def _unit(n: int, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_sound_tables_pass():
    assert validate_staged(_chunks(5), _unit(5), ValidationPolicy(dim=8)).success


def test_each_defect_is_named_in_the_report():
    cases = {
        "text_chars": _chunks(3, text="   "),
        "span_ok": _chunks(3, char_end=0),
        "date_ok": _chunks(3, date="1887-13-01"),
        "n_groups": _chunks(3, groups=[]),
        "chunk_id": _chunks(3, chunk_id="c0"),
    }
    for column, table in cases.items():
        report = validate_staged(table, _unit(3), ValidationPolicy(dim=8))
        failed = [r for r in report.results if not r.success]
        assert not report.success and any(r.kwargs.get("column") == column for r in failed), column


def test_vector_norms_and_dimension_are_checked():
    bad = _unit(3)
    bad[1] *= 2
    report = validate_staged(_chunks(3), bad, ValidationPolicy(dim=8))
    assert [r.kwargs["column"] for r in report.results if not r.success] == ["norm"]
    report = validate_staged(_chunks(3), _unit(3, dim=4), ValidationPolicy(dim=8))
    assert "dim" in [r.kwargs["column"] for r in report.results if not r.success]


def test_operator_expectations_are_added_to_the_suite():
    policy = ValidationPolicy(dim=8, extra=(ExpectationSpec(
        "chunks", "ExpectColumnValuesToBeInSet", {"column": "corpus", "value_set": ["autre"]}),))
    report = validate_staged(_chunks(2), _unit(2), policy)
    assert not report.success
    assert "**FAILED**" in report.to_markdown()
