"""Who is asking: a principal name resolved to a tenant and groups.

Principals live in MABILLON_HOME/principals.json, `{"alice": {"tenant": "t", "groups": [..]}}`.
No name → the default principal (settings.default_tenant / default_groups). An unknown name or
an entry without tenant or groups is refused: the policy fails closed.
"""
from __future__ import annotations

import json
from pathlib import Path

from schemas.retrieval import AccessDenied, Principal
from schemas.settings import MabillonSettings

DEFAULT_PRINCIPAL = "default"


def principals_path(settings: MabillonSettings) -> Path:
    return settings.home / "principals.json"


def resolve_principal(settings: MabillonSettings, name: str | None = None) -> Principal:
    if name is None or name == DEFAULT_PRINCIPAL:
        return Principal(principal_id=DEFAULT_PRINCIPAL, tenant=settings.default_tenant,
                         groups=list(settings.default_groups))
    path = principals_path(settings)
    try:
        table = json.loads(path.read_text("utf-8")) if path.exists() else {}
    except json.JSONDecodeError as exc:
        raise AccessDenied(f"{path} is not valid JSON ({exc}); no principal can be resolved") from None
    entry = table.get(name)
    if not isinstance(entry, dict):
        raise AccessDenied(f"unknown principal {name!r}; add it to {path} as "
                           '{"%s": {"tenant": ..., "groups": [...]}}' % name)
    tenant, groups = entry.get("tenant"), entry.get("groups")
    if not isinstance(tenant, str) or not tenant or not isinstance(groups, list) or not groups:
        raise AccessDenied(f"principal {name!r} in {path} needs a tenant and at least one group")
    return Principal(principal_id=name, tenant=tenant, groups=[str(g) for g in groups])
