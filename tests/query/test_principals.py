"""Principal resolution: default, known, unknown and malformed entries (fails closed)."""
from __future__ import annotations

import json

import pytest

from schemas.retrieval import AccessDenied
from schemas.settings import MabillonSettings
from tasks.query.principals import resolve_principal


def test_default_principal_comes_from_settings(tmp_path):
    p = resolve_principal(MabillonSettings(home=tmp_path))
    assert (p.principal_id, p.tenant, p.groups) == ("default", "default", ["public"])


def test_known_principal_is_read_from_principals_json(tmp_path):
    (tmp_path / "principals.json").write_text(json.dumps(
        {"alice": {"tenant": "bnf", "groups": ["public", "staff"]}}))
    p = resolve_principal(MabillonSettings(home=tmp_path), "alice")
    assert (p.tenant, p.groups) == ("bnf", ["public", "staff"])


@pytest.mark.parametrize("table", [{}, {"bob": {"tenant": "bnf"}}, {"bob": {"groups": ["x"]}},
                                   {"bob": {"tenant": "bnf", "groups": []}}, {"bob": "bnf"}])
def test_unknown_or_malformed_principal_is_refused(tmp_path, table):
    (tmp_path / "principals.json").write_text(json.dumps(table))
    with pytest.raises(AccessDenied):
        resolve_principal(MabillonSettings(home=tmp_path), "bob")
