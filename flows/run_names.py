"""Run names a person recognises in the Prefect UI: built from the question, or from the operation
and its generation, instead of Prefect's random two words. Each is called by Prefect when the run
starts (`flow_run_name=`), reading the run's own parameters; none contains a secret."""
from __future__ import annotations

from pathlib import PurePath


def _params() -> dict:
    from prefect.runtime import flow_run

    params = flow_run.parameters.get("params") or {}
    return params if isinstance(params, dict) else getattr(params, "model_dump", lambda: {})()


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _by(params: dict) -> str:
    who = (params.get("operator") or "").strip()
    return f" by {_short(who, 30)}" if who else ""


def ask_run_name() -> str:
    return f"ask: {_short(_params().get('question') or '?')}"


def ask_batch_run_name() -> str:
    path = _params().get("questions_path") or "?"
    return f"ask-batch: {PurePath(path).name}"


def promote_run_name() -> str:
    p = _params()
    return f"promote {p.get('generation') or '?'}{_by(p)}"


def rollback_run_name() -> str:
    p = _params()
    target = p.get("to")
    return f"rollback{' to ' + target if target else ''}{_by(p)}"


def canary_run_name() -> str:
    p = _params()
    what = ("stop canary" + (f" of {p['generation']}" if p.get("generation") else "") if p.get("stop")
            else f"canary {p.get('generation') or '?'} → {', '.join(p.get('groups') or []) or '?'}")
    return f"{what}{_by(p)}"


def delete_run_name() -> str:
    p = _params()
    ids = p.get("doc_ids") or []
    what = _short(ids[0], 40) if len(ids) == 1 else f"{len(ids)} documents"
    return f"delete {what}{_by(p)}"


def gc_run_name() -> str:
    return f"gc{_by(_params())}"


def ingest_run_name() -> str:
    p = _params()
    sources = [PurePath(str(s).rstrip("/")).name for s in (p.get("drop_folder"), p.get("uri_list")) if s]
    return f"ingest {' + '.join(sources) or 'nothing'}"
