"""The serve-state file of a home (manifests/.serve.json): written by `mabillon serve` when it is
up, removed when it stops, read by every other command of the same home.

A state file left by a serve that died is recognised (its pid is gone on this host) and ignored.
The file holds keys, so it is readable by its owner only. This module takes the manifests folder
and imports nothing heavy: `mabillon ask` reads it before anything else.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path

from pydantic import ValidationError

from schemas.serving import ServeState

SERVE_STATE = ".serve.json"
OWNER_ONLY = 0o600


def serve_state_path(manifests: Path) -> Path:
    return Path(manifests) / SERVE_STATE


def write_serve_state(manifests: Path, state: ServeState) -> None:
    from tasks.store.atomic import atomic_write_text

    payload = state.model_dump(mode="json")
    for key in ("api_auth_string", "query_key"):  # model_dump masks secrets; the file needs them
        secret = getattr(state, key)
        payload[key] = secret.get_secret_value() if secret is not None else None
    atomic_write_text(serve_state_path(manifests), json.dumps(payload, indent=2), mode=OWNER_ONLY)


def read_serve_state(manifests: Path) -> ServeState | None:
    """The state of a serve that is still running, or None (no file, unreadable, or stale)."""
    try:
        state = ServeState.model_validate_json(serve_state_path(manifests).read_text("utf-8"))
    except (OSError, ValueError, ValidationError):
        return None
    if state.host == socket.gethostname() and not pid_alive(state.pid):
        return None
    return state


def clear_serve_state(manifests: Path, pid: int) -> None:
    """Remove the file if it is this process's (another serve may have replaced it)."""
    current = read_serve_state(manifests)
    if current is not None and current.pid != pid:
        return
    with contextlib.suppress(FileNotFoundError):
        serve_state_path(manifests).unlink()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
