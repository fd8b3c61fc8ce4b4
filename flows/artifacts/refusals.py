"""What an archivist sees of a run that refused inputs: its final state says so (Completed,
"3 refused: …"), and a table counts the refusals per reason (tasks/ops/disclosure.py: the
inputs are counted, never named — their names are document ids; `mabillon ingest` and the
generation's manifest name each)."""
from __future__ import annotations

import logging

from schemas.generation import IngestResult, Quarantined
from tasks.markup import visible
from tasks.ops.disclosure import refusal_rows, refused_words

log = logging.getLogger(__name__)


def publish_refusals(quarantined: list[Quarantined]) -> None:
    """The table artifact `refused-inputs` of this run, when it refused anything."""
    if not quarantined:
        return
    from prefect.artifacts import create_table_artifact

    rows = [{k: visible(v) if isinstance(v, str) else v for k, v in row.items()}
            for row in refusal_rows(quarantined)]
    try:
        create_table_artifact(key="refused-inputs", table=rows,
                              description=f"{len(quarantined)} input(s) refused, counted per reason")
    except Exception as exc:  # a view failing must not fail the run that refused the inputs
        log.warning("refusals table not published: %s", exc)


def ended(result: IngestResult | None):
    """The run's return: the result itself, or — when inputs were refused — a Completed state
    carrying it, whose message says how many (the run list shows it; the caller still gets the
    result)."""
    if result is None or not result.quarantined:
        return result
    from prefect.states import Completed

    return Completed(message=refused_words(len(result.quarantined)), data=result)
