"""Who is asking: a principal name, or an access token, resolved to a tenant, groups and roles.

Principals live in MABILLON_HOME/principals.json (tasks.store.layout.principals_path):
`{"alice": {"tenant": "t", "groups": [..], "roles": ["operator"], "token_sha256": "<hex>"}}`.
`roles` and `token_sha256` are optional; `token_sha256` may also be a list (token rotation).

Two doors, for two kinds of caller:
- `resolve_principal(settings, name)`: the local CLI, whose user already holds the state root.
  An unknown name or a malformed entry is refused with a message that says how to fix it.
- `resolve_token(settings, token)`: anything reached over a network (Prefect UI forms, the
  reading room). No token → the default principal. A token is looked up by its SHA-256 digest;
  a wrong token, like any unreadable policy, is refused with one message that names no path and
  does not say whether a principal exists.
The policy fails closed: an entry without tenant or groups grants nothing.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from schemas.retrieval import AccessDenied, Principal
from schemas.settings import MabillonSettings
from tasks.store.layout import principals_path

DEFAULT_PRINCIPAL = "default"
INVALID_TOKEN = "invalid access token"


def default_principal(settings: MabillonSettings) -> Principal:
    return Principal(principal_id=DEFAULT_PRINCIPAL, tenant=settings.default_tenant,
                     groups=list(settings.default_groups))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _read_table(path: Path) -> dict:
    try:
        table = json.loads(path.read_text("utf-8")) if path.exists() else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AccessDenied(f"{path} is not valid JSON ({exc}); no principal can be resolved") from None
    if not isinstance(table, dict):
        raise AccessDenied(f"{path} must hold one object of principals; no principal can be resolved")
    return table


def _principal(name: str, entry: object) -> Principal | None:
    """The entry as a principal, or None when it grants nothing (missing tenant or groups)."""
    if not isinstance(entry, dict):
        return None
    tenant, groups, roles = entry.get("tenant"), entry.get("groups"), entry.get("roles", [])
    if not isinstance(tenant, str) or not tenant or not isinstance(groups, list) or not groups:
        return None
    if not isinstance(roles, list):
        return None
    return Principal(principal_id=name, tenant=tenant, groups=[str(g) for g in groups],
                     roles=[str(r) for r in roles])


def resolve_principal(settings: MabillonSettings, name: str | None = None) -> Principal:
    if name is None or name == DEFAULT_PRINCIPAL:
        return default_principal(settings)
    path = principals_path(settings)
    entry = _read_table(path).get(name)
    if not isinstance(entry, dict):
        raise AccessDenied(f"unknown principal {name!r}; add it to {path} as "
                           '{"%s": {"tenant": ..., "groups": [...]}}' % name)
    principal = _principal(name, entry)
    if principal is None:
        raise AccessDenied(f"principal {name!r} in {path} needs a tenant and at least one group")
    return principal


def resolve_token(settings: MabillonSettings, token: str | None) -> Principal:
    """The principal whose `token_sha256` matches `token`; no token → the default principal."""
    if token is None or not token.strip():
        return default_principal(settings)
    return resolve_token_digest(settings, token_digest(token.strip()))


def resolve_token_digest(settings: MabillonSettings, digest: str) -> Principal:
    """The principal whose `token_sha256` is `digest` (a sign-in session keeps the digest, never
    the token), read from principals.json now: a token withdrawn there is refused at once."""
    try:
        table = _read_table(principals_path(settings))
    except AccessDenied:
        raise AccessDenied(INVALID_TOKEN) from None  # the reason is the operator's, not the caller's
    found = None
    for name, entry in table.items():
        digests = entry.get("token_sha256") if isinstance(entry, dict) else None
        digests = [digests] if isinstance(digests, str) else digests or []
        # compare every entry, match or not, so the time taken does not tell how far a guess got
        if any(isinstance(d, str) and hmac.compare_digest(d.lower().encode(), digest.encode())
               for d in digests):
            found = found or (name, entry)
    principal = _principal(*found) if found else None
    if principal is None:
        raise AccessDenied(INVALID_TOKEN)
    return principal


def require_operator(principal: Principal) -> Principal:
    if not principal.is_operator:
        raise AccessDenied("this action needs an operator's access token")
    return principal


def list_principals(settings: MabillonSettings) -> list[Principal]:
    """Every principal that grants something: the default one and each valid entry."""
    table = _read_table(principals_path(settings))
    found = [_principal(name, entry) for name, entry in sorted(table.items())]
    return [default_principal(settings), *(p for p in found if p is not None)]
