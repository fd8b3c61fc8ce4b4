"""The `scheduled-ingest` flow: release whatever sits in a drop folder (a local folder or an s3://
prefix) or is listed in a URI file.

Re-ingesting unchanged inputs is cheap (same bytes → same revision, nothing re-parsed), so each
scheduled run simply hands the whole folder and list to `release`.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field

from flows.artifacts.generations import publish_generations
from flows.artifacts.refusals import ended, publish_refusals
from flows.release import ReleaseOptions, release
from flows.run_names import ingest_run_name
from flows.timing import stage_markdown
from schemas.generation import IngestResult
from schemas.settings import MabillonSettings
from tasks.access.principals import default_principal
from tasks.markup import md_code, md_text
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)


class ScheduledIngestParams(BaseModel):
    """The parameter form of a scheduled (or on-demand) ingest."""

    drop_folder: str | None = Field(None, description="local folder or s3://bucket/prefix, walked like "
                                                      "`mabillon ingest FOLDER`")
    uri_list: str | None = Field(None, description="text file: one local path, file:// or s3:// URI a "
                                                   "line; lines starting with # are comments")
    options: ReleaseOptions = Field(default_factory=lambda: ReleaseOptions(reason="scheduled ingest"))
    settle_s: float = Field(10.0, ge=0, description="a drop-folder file modified less than this many "
                                                    "seconds ago is still being written: left for the next run")


def still_being_written(folder: str, settle_s: float, now: float | None = None) -> list[str]:
    """file:// URIs of the files under a local drop folder modified in the last `settle_s`
    seconds: a copy or upload in progress, ingested half-written otherwise. An s3:// prefix has
    none (an object appears only once its upload is complete); names that uploaders give files
    in progress (.part, .crdownload, ...) are never inputs at all (tasks.ingest.acquire)."""
    root = Path(folder)
    if "://" in folder or not root.is_dir() or settle_s <= 0:
        return []
    cutoff = (time.time() if now is None else now) - settle_s
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        try:
            if path.stat().st_mtime > cutoff:
                out.append(path.resolve().as_uri())
        except FileNotFoundError:  # removed while we looked
            continue
    return out


class UriListEntries(BaseModel):
    paths: list[str] = Field(default_factory=list)  # local paths and s3:// URIs, as acquire reads them
    skipped: list[str] = Field(default_factory=list)  # "uri: why" — recorded, not fatal


def read_uri_list(path: Path) -> UriListEntries:
    """Local paths, file:// and s3:// URIs become inputs. Every other line is skipped and named
    with its reason, never fatal: another scheme (http://, ...), a local path that does not
    exist (a stray word, a typo), a line that is not text. A list that cannot be read at all is
    one skipped entry."""
    out = UriListEntries()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        out.skipped.append(f"{path}: the URI list does not exist")
        return out
    except (OSError, UnicodeDecodeError) as exc:
        out.skipped.append(f"{path}: the URI list could not be read ({type(exc).__name__})")
        return out
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        where = f"line {number} {entry!r}"
        if any(ord(c) < 32 for c in entry):
            out.skipped.append(f"{where}: holds control characters")
            continue
        parsed = urlparse(entry)
        if parsed.scheme == "file":
            local = Path(unquote(parsed.path))
        elif parsed.scheme == "s3":
            if not parsed.netloc:
                out.skipped.append(f"{where}: an s3:// URI needs a bucket")
            else:
                out.paths.append(entry)  # read with the storage settings (endpoint, credentials)
            continue
        elif not parsed.scheme or len(parsed.scheme) == 1:  # relative to the list; C:\ style too
            local = (path.parent / entry).resolve()
        else:
            out.skipped.append(f"{where}: scheme {parsed.scheme}:// is not read by acquire "
                               "(local paths, file:// and s3:// URIs are)")
            continue
        if local.exists():
            out.paths.append(str(local))
        else:
            out.skipped.append(f"{where}: no such file or folder")
    return out


def collect_inputs(params: ScheduledIngestParams) -> UriListEntries:
    inputs = UriListEntries()
    if params.drop_folder:
        inputs.paths.append(params.drop_folder)
    if params.uri_list:
        listed = read_uri_list(Path(params.uri_list))
        inputs.paths += listed.paths
        inputs.skipped += listed.skipped
    return inputs


def summary_markdown(inputs: UriListEntries, result: IngestResult | None) -> str:
    """The inputs the operator configured are named; what was quarantined or skipped inside them
    is counted (file names are document ids: tasks/ops/disclosure.py); the CLI and the manifest
    name them."""
    lines = ["# Scheduled ingest", "", f"- inputs: {len(inputs.paths)}"]
    lines += [f"  - {md_code(p)}" for p in inputs.paths]
    if result is None:
        lines.append("- nothing to ingest: no drop folder or URI list given")
    else:
        state = ("published and serving" if result.published and result.serving else
                 "published, staged" if result.published else "nothing new; serving unchanged")
        run = result.run.model_dump(exclude={"stage_seconds"})
        lines += [f"- generation {md_code(result.generation)}: {state}",
                  "- this run: " + md_text(", ".join(f"{k} {v}" for k, v in run.items()))]
        if result.quarantined:
            lines.append(f"- quarantined: {len(result.quarantined)} input(s), counted per reason in the "
                         f"table 'refused-inputs'; named with their reasons in the generation's manifest")
        timings = stage_markdown(result.run.stage_seconds)
        if timings:
            lines += ["", "## Stage timings", "", *timings]
    if inputs.skipped:
        lines.append(f"- skipped: {len(inputs.skipped)} (still being written, or not found; see the run's log)")
    return "\n".join(lines)


@flow(name="scheduled-ingest", flow_run_name=ingest_run_name,
      description="Archivists: ingest what sits in the drop folder or the URI list and publish a "
                  "generation (on a schedule, or now).")
def scheduled_ingest(params: ScheduledIngestParams,
                     settings: MabillonSettings | None = None) -> IngestResult | None:
    settings = settings or MabillonSettings()
    inputs = collect_inputs(params)
    for skipped in inputs.skipped:
        log.warning("scheduled ingest skipped %s", skipped)
    deferred = still_being_written(params.drop_folder, params.settle_s) if params.drop_folder else []
    inputs.skipped += [f"{uri}: still being written (modified in the last {params.settle_s:g} s); "
                       "next run" for uri in deferred]
    options = params.options.model_copy(update={"defer": [*params.options.defer, *deferred]})
    result = release(inputs.paths, options, settings) if inputs.paths else None
    create_markdown_artifact(key="scheduled-ingest", markdown=summary_markdown(inputs, result),
                             description="inputs and outcome of one scheduled ingest")
    # shown on this run too, not only on its `release` subflow run
    publish_generations(StoreLayout.from_settings(settings), public=default_principal(settings))
    publish_refusals(result.quarantined if result else [])
    return ended(result)  # "Completed" with "3 refused: …" when inputs were refused
