"""Validate: Great Expectations suites over the staged chunk and vector tables.

A failed suite stops the release: the report is written beside the manifests and nothing is
published. Derived columns (norms, dimensions, span checks) are computed here so that each
expectation is one plain column check a reader can follow in the report.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from schemas.generation import ExpectationResult, ValidationReport
from schemas.settings import ValidationSettings
from schemas.generation import ValidationFailed
from tasks.ingest.merge import StagedGeneration
from tasks.store.atomic import atomic_write_text
from tasks.store.layout import StoreLayout
from tasks.task_wrapper import as_task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExpectationSpec:
    table: str  # "chunks" | "vectors"
    expectation: str  # Great Expectations class name, e.g. "ExpectColumnValuesToBeUnique"
    kwargs: dict


@dataclass(frozen=True)
class ValidationPolicy:
    dim: int
    norm_tolerance: float = 1e-3
    extra: tuple[ExpectationSpec, ...] = field(default_factory=tuple)

    @classmethod
    def from_settings(cls, settings: ValidationSettings, dim: int) -> "ValidationPolicy":
        extra = tuple(ExpectationSpec(e.table, e.expectation, dict(e.kwargs)) for e in settings.extra)
        return cls(dim=dim, norm_tolerance=settings.norm_tolerance, extra=extra)


def default_suite(policy: ValidationPolicy) -> list[ExpectationSpec]:
    lo, hi = 1 - policy.norm_tolerance, 1 + policy.norm_tolerance
    return [
        ExpectationSpec("chunks", "ExpectColumnValuesToBeUnique", {"column": "chunk_id"}),
        ExpectationSpec("chunks", "ExpectColumnValuesToNotBeNull", {"column": "text"}),
        ExpectationSpec("chunks", "ExpectColumnValuesToBeBetween", {"column": "text_chars", "min_value": 1}),
        ExpectationSpec("chunks", "ExpectColumnValuesToBeInSet", {"column": "span_ok", "value_set": [True]}),
        ExpectationSpec("chunks", "ExpectColumnValuesToBeInSet", {"column": "date_ok", "value_set": [True]}),
        ExpectationSpec("chunks", "ExpectColumnValuesToBeInSet", {"column": "interval_ok", "value_set": [True]}),
        ExpectationSpec("chunks", "ExpectColumnValuesToNotBeNull", {"column": "tenant"}),
        ExpectationSpec("chunks", "ExpectColumnValuesToBeBetween", {"column": "n_groups", "min_value": 1}),
        ExpectationSpec("vectors", "ExpectColumnValuesToBeUnique", {"column": "chunk_id"}),
        ExpectationSpec("vectors", "ExpectColumnValuesToBeInSet", {"column": "dim", "value_set": [policy.dim]}),
        ExpectationSpec("vectors", "ExpectColumnValuesToBeBetween", {"column": "norm", "min_value": lo, "max_value": hi}),
        ExpectationSpec("vectors", "ExpectColumnValuesToBeInSet", {"column": "finite", "value_set": [True]}),
    ]


def chunk_frame(chunks: pa.Table, page_lengths: dict[tuple[str, int], int] | None = None) -> pd.DataFrame:
    """Chunk columns plus the derived checks the suite reads."""
    df = chunks.select(["chunk_id", "doc_id", "corpus", "text", "tenant", "date", "char_start", "char_end",
                        "page_start", "page_end"]).to_pandas()
    df["text_chars"] = df["text"].fillna("").str.strip().str.len()
    df["n_groups"] = pc.list_value_length(chunks["groups"]).fill_null(0).to_numpy(zero_copy_only=False)
    df["span_ok"] = (df["char_end"] > df["char_start"]) & (df["char_start"] >= 0) & \
        (df["page_start"] >= 1) & (df["page_end"] >= df["page_start"])
    dates = pd.to_datetime(df["date"], format="%Y-%m-%d", errors="coerce")
    df["date_ok"] = df["date"].isna() | dates.notna()
    # a validity interval, where one is given, is not empty (absent bounds are open)
    start, end = (chunks[c] if c in chunks.schema.names else pa.nulls(chunks.num_rows, pa.timestamp("us", tz="UTC"))
                  for c in ("valid_from", "valid_to"))
    df["interval_ok"] = pc.fill_null(pc.less(start, end), True).to_numpy(zero_copy_only=False)
    return df


def vector_frame(chunk_ids: pa.Array, vectors: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({
        "chunk_id": chunk_ids.to_pylist(),
        "dim": np.full(len(vectors), vectors.shape[1] if vectors.ndim == 2 else 0),
        "norm": np.linalg.norm(vectors, axis=1) if len(vectors) else np.zeros(0),
        "finite": np.isfinite(vectors).all(axis=1) if len(vectors) else np.zeros(0, dtype=bool),
    })


def run_suite(frames: dict[str, pd.DataFrame], specs: list[ExpectationSpec]) -> ValidationReport:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas("staged")
    results: list[ExpectationResult] = []
    for table, frame in frames.items():
        table_specs = [s for s in specs if s.table == table]
        if not table_specs:
            continue
        batch = (source.add_dataframe_asset(table).add_batch_definition_whole_dataframe("all")
                 .get_batch(batch_parameters={"dataframe": frame}))
        suite = gx.ExpectationSuite(name=f"staged-{table}")
        for spec in table_specs:
            suite.add_expectation(getattr(gx.expectations, spec.expectation)(**spec.kwargs))
        outcome = batch.validate(suite)
        for r in outcome.results:
            kwargs = {k: v for k, v in r.expectation_config.kwargs.items() if k != "batch_id"}
            results.append(ExpectationResult(
                table=table, expectation=r.expectation_config.type, kwargs=kwargs,
                success=bool(r.success), unexpected_count=r.result.get("unexpected_count"),
                examples=[str(x) for x in (r.result.get("partial_unexpected_list") or [])[:5]],
            ))
    report = ValidationReport(success=all(r.success for r in results), results=results)
    log.info("validation: %d expectations, success=%s", len(results), report.success)
    return report


def validate_staged(chunks: pa.Table, vectors: np.ndarray, policy: ValidationPolicy) -> ValidationReport:
    frames = {"chunks": chunk_frame(chunks), "vectors": vector_frame(chunks["chunk_id"], vectors)}
    return run_suite(frames, [*default_suite(policy), *policy.extra])


def validate(staged: StagedGeneration, policy: ValidationPolicy, layout: StoreLayout, label: str) -> ValidationReport:
    report = validate_staged(staged.chunks, staged.vectors, policy)
    path = layout.reports / f"{label}-validation.md"
    atomic_write_text(path, f"# Validation of {label}\n\n"
                            f"**{'passed' if report.success else 'FAILED — nothing published'}**\n\n"
                            + report.to_markdown() + "\n")
    if not report.success:
        raise ValidationFailed(report, str(path))
    return report


def validate_generation(staged: StagedGeneration, settings: ValidationSettings,
                        layout: StoreLayout) -> ValidationReport:
    """The release's validate step: the default suite and the operator's extra expectations."""
    return validate(staged, ValidationPolicy.from_settings(settings, staged.space.dim), layout,
                    staged.generation or "staged")


validate_task = as_task(validate_generation, "validate")
