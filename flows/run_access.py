"""Who is asking in a flow run, and keeping their token out of what Prefect stores.

A run started from a deployment (the UI, the API, a schedule) knows its caller only by an access
token, resolved through the token digests of principals.json (`resolve_token`): no token is the
default (public) principal, a wrong one is refused with one message that names nothing. A name
typed into such a run is never trusted. A flow called in-process (the CLI, the tests) runs for
the owner of the state root, who may name a principal (`resolve_principal`).

Operator flows (promote, rollback, delete, gc) run from a deployment need an operator's token
and the operator's own name; both are recorded in the routing history.
"""
from __future__ import annotations

import logging

from pydantic import SecretStr

from schemas.retrieval import AccessDenied, Principal
from schemas.settings import MabillonSettings
from tasks.access.principals import require_operator, resolve_principal, resolve_token

log = logging.getLogger(__name__)

MASK = "**********"
SECRET_PARAMETERS = ("access_token", "operator_token")


class Refusal(Exception):
    """A run refused before it did anything: what happened, in words a UI user may read (no
    server path, nothing about which principals exist). `kind` names the CLI's exit code."""

    def __init__(self, message: str, kind: str = "usage"):
        super().__init__(message)
        self.kind = kind


def deployment_run() -> bool:
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return bool(ctx and ctx.flow_run and ctx.flow_run.deployment_id)


def secret_value(token: SecretStr | str | None) -> str | None:
    if token is None:
        return None
    return token.get_secret_value() if isinstance(token, SecretStr) else str(token)


def run_principal(settings: MabillonSettings, token: SecretStr | str | None,
                  name: str | None = None) -> Principal:
    """The principal of this run: from the token in a deployment run (a name is ignored there);
    in-process, a named principal or else the token."""
    # AccessDenied passes through: resolve_token's refusal already names nothing
    if name and not deployment_run():
        return resolve_principal(settings, name)
    return resolve_token(settings, secret_value(token))


def run_actor(settings: MabillonSettings, token: SecretStr | str | None,
              operator: str | None) -> str:
    """Who is recorded for an operator action. In a deployment run: the operator's typed name and
    the principal of their operator token, both required."""
    if not deployment_run():
        return operator.strip() if operator and operator.strip() else settings.actor
    try:
        principal = require_operator(resolve_token(settings, secret_value(token)))
    except AccessDenied:
        raise Refusal("this action needs an operator's access token (the token was missing, "
                      "wrong, or not an operator's)", "access_denied") from None
    if not operator or not operator.strip():
        raise Refusal("type your name in the operator field: it is recorded in the routing history")
    return f"{operator.strip()} [{principal.principal_id}]"


def mask_secret_parameters() -> None:
    """Overwrite this run's stored parameters with the secrets masked.

    The UI sends a token in the clear and Prefect stores the run's parameters as sent; the run
    has read them by now, so the stored copy keeps only a mask (retrying such a run from the UI
    therefore needs the token typed again).
    """
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    if not ctx or not ctx.flow_run or not ctx.flow_run.deployment_id:
        return
    stored = ctx.flow_run.parameters or {}
    masked = _masked(stored)
    if masked == stored:
        return
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            client.update_flow_run(ctx.flow_run.id, parameters=masked)
    except Exception as exc:  # the run goes on; the operator learns the mask failed
        log.error("could not mask the secret parameters of flow run %s: %s", ctx.flow_run.id, exc)


def _masked(value):
    if isinstance(value, dict):
        return {k: (MASK if k in SECRET_PARAMETERS and v not in (None, "") else _masked(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value
