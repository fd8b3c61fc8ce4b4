"""Principal resolution: default, known, unknown and malformed entries (fails closed)."""
from __future__ import annotations

import json

import pytest

from schemas.retrieval import AccessDenied
from schemas.settings import MabillonSettings
from tasks.access.principals import require_operator, resolve_principal, resolve_token, token_digest


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


def _write(tmp_path, table) -> MabillonSettings:
    (tmp_path / "principals.json").write_text(json.dumps(table))
    return MabillonSettings(home=tmp_path)


def test_a_token_resolves_through_its_sha256_digest(tmp_path):
    settings = _write(tmp_path, {"alice": {"tenant": "bnf", "groups": ["staff"],
                                           "token_sha256": token_digest("s3cret-alice")},
                                 "ops": {"tenant": "bnf", "groups": ["staff"], "roles": ["operator"],
                                         "token_sha256": [token_digest("old"), token_digest("new")]}})
    alice = resolve_token(settings, "s3cret-alice")
    assert (alice.principal_id, alice.tenant, alice.groups, alice.is_operator) == ("alice", "bnf", ["staff"], False)
    assert require_operator(resolve_token(settings, "new")).principal_id == "ops"
    with pytest.raises(AccessDenied, match="operator"):
        require_operator(alice)


def test_no_token_is_the_default_principal(tmp_path):
    settings = _write(tmp_path, {"alice": {"tenant": "bnf", "groups": ["staff"], "token_sha256": token_digest("x")}})
    for token in (None, "", "   "):
        assert resolve_token(settings, token).principal_id == "default"


@pytest.mark.parametrize("table", [
    {"alice": {"tenant": "bnf", "groups": ["staff"], "token_sha256": "0" * 64}},  # wrong token
    {"alice": {"tenant": "bnf", "groups": [], "token_sha256": token_digest("tok")}},  # grants nothing
    {"alice": {"groups": ["staff"], "token_sha256": token_digest("tok")}},
    [],  # not an object
])
def test_a_wrong_token_is_refused_without_naming_a_path_or_a_principal(tmp_path, table):
    settings = _write(tmp_path, table)
    with pytest.raises(AccessDenied) as refused:
        resolve_token(settings, "tok")
    assert str(refused.value) == "invalid access token"


def test_an_unreadable_policy_refuses_tokens_with_the_same_message(tmp_path):
    (tmp_path / "principals.json").write_text("{not json")
    with pytest.raises(AccessDenied) as refused:
        resolve_token(MabillonSettings(home=tmp_path), "tok")
    assert str(refused.value) == "invalid access token"
