"""What a running `mabillon serve` publishes about itself in its home, so that commands run in
the same home reuse its Prefect server and its warm query service instead of starting their own."""
from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, SecretStr


class ServeState(BaseModel):
    pid: int
    host: str  # the machine serve runs on: a pid means something only there
    started_at: datetime
    home: str
    api_url: str  # the Prefect API the deployments are registered with
    ui_url: str
    # Prefect's basic-auth string when the server was started with one (PREFECT_API_AUTH_STRING)
    api_auth_string: SecretStr | None = None
    # The warm query service: answers `mabillon ask` without loading models per command
    query_url: str | None = None
    query_key: SecretStr | None = None  # bearer key; the state file is readable by its owner only
