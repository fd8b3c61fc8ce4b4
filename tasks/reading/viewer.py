"""The viewer of a request, as a principal: a bearer token (the header, or the digest a sign-in
session keeps: tasks/reading/sessions.py), a name set by a trusted single-sign-on proxy when one
is configured, or the default principal (anonymous).

Tokens resolve through `resolve_token` only (their SHA-256 in principals.json); a wrong token is
refused with one message that says nothing about who exists. With a trusted header configured,
a request that carries neither it nor a token is refused: behind the proxy, no one is default.
"""
from __future__ import annotations

from schemas.retrieval import AccessDenied, Principal
from schemas.settings import MabillonSettings
from tasks.access.principals import INVALID_TOKEN, resolve_principal, resolve_token, resolve_token_digest

SIGN_IN_REQUIRED = "sign-in required"


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer …` header; a header of another scheme is refused."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AccessDenied(INVALID_TOKEN)
    return token.strip()


def resolve_viewer(settings: MabillonSettings, authorization: str | None = None,
                   session_digest: str | None = None, headers: dict[str, str] | None = None) -> Principal:
    token = bearer_token(authorization)
    if token:
        return resolve_token(settings, token)
    if session_digest:
        return resolve_token_digest(settings, session_digest)
    header = settings.reading_room.trusted_header
    if header:
        name = (headers or {}).get(header.lower())
        if not name or not name.strip():
            raise AccessDenied(SIGN_IN_REQUIRED)
        try:
            return resolve_principal(settings, name.strip())
        except AccessDenied:
            raise AccessDenied(SIGN_IN_REQUIRED) from None
    return resolve_token(settings, None)
