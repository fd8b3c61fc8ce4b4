"""IIIF Authorization Flow 2.0 on a room whose anonymous visitors see nothing (every page is
restricted): a reader who may see a page finds the probe, access and token services in its
info.json; the token service gives a signed-in session a probe token; the probe answers 200 for
a page that opens and the same 401, word for word, for a page that does not exist and one the
reader may not see — and to anyone else the page's info.json stays the 404 of a missing page."""
from __future__ import annotations

import json
import re

import pytest

from tests.reading.conftest import SCAN_DOC, TOKENS, bearer, settings_of
from tests.reading.test_room import catalog_of

ORIGIN = "http://viewer.example:8080"


@pytest.fixture(scope="module")
def closed_room(sample_home):
    from fastapi.testclient import TestClient

    from flows.reading_room import create_app

    settings = settings_of(sample_home).model_copy(update={"default_groups": ["nobody"]})
    with TestClient(create_app(settings, warm=False)) as client:
        yield client


def posted(html: str) -> dict:
    found = re.search(r"postMessage\((\{.*\}), (\"[^\"]*\")\);", html)
    assert found, html
    assert json.loads(found.group(2)) == ORIGIN  # posted to the viewer's origin, no other
    return json.loads(found.group(1))


def test_a_restricted_page_offers_a_sign_in_and_probes_per_specification(closed_room, sample_home):
    client = closed_room
    image_id = f"{catalog_of(sample_home).current[SCAN_DOC]}-p0001"
    missing = f"r{'0' * 20}-p0001"
    # to the anonymous reader: the restricted page is a missing one
    anonymous = client.get(f"/iiif/3/{image_id}/info.json")
    assert anonymous.status_code == 404 and anonymous.json() == client.get(f"/iiif/3/{missing}/info.json").json()
    # to a reader who may see it: the services a viewer follows
    info = client.get(f"/iiif/3/{image_id}/info.json", headers=bearer("alice")).json()
    [probe] = info["service"]
    assert probe["type"] == "AuthProbeService2" and probe["id"].endswith(f"/iiif/auth/probe/{image_id}")
    [access] = probe["service"]
    assert access["type"] == "AuthAccessService2" and access["profile"] == "active"
    [token_service] = access["service"]
    assert token_service["type"] == "AuthAccessTokenService2"
    path = lambda url: url.removeprefix("http://testserver")  # noqa: E731
    assert client.get(path(access["id"]), follow_redirects=False).headers["location"] == "/login"
    # not signed in: the token service says so, to the viewer's origin
    query = {"messageId": "m-1", "origin": ORIGIN}
    refused = posted(client.get(path(token_service["id"]), params=query).text)
    assert refused["type"] == "AuthAccessTokenError2" and refused["messageId"] == "m-1"
    assert client.get(path(token_service["id"]), params={"messageId": "m", "origin": "javascript:x"}).status_code == 400
    # signed in (the room's own sign-in): a token, good for the probe
    client.cookies.clear()
    assert client.post("/login", data={"token": TOKENS["alice"]}, follow_redirects=False).status_code == 303
    granted = posted(client.get(path(token_service["id"]), params=query).text)
    assert granted["type"] == "AuthAccessToken2" and granted["messageId"] == "m-1" and granted["expiresIn"] > 0
    token = {"Authorization": f"Bearer {granted['accessToken']}"}
    client.cookies.clear()
    assert client.get(path(probe["id"]), headers=token).json()["status"] == 200
    no_token = client.get(path(probe["id"])).json()
    assert no_token["status"] == 401 and no_token["type"] == "AuthProbeResult2" and no_token["heading"]
    assert client.get(path(probe["id"]).replace(image_id, missing), headers=token).json() == no_token
    # a reader of another tenant: the same 401 as for a page that does not exist
    assert client.post("/login", data={"token": TOKENS["bob"]}, follow_redirects=False).status_code == 303
    bobs = posted(client.get(path(token_service["id"]), params=query).text)["accessToken"]
    client.cookies.clear()
    assert client.get(path(probe["id"]), headers={"Authorization": f"Bearer {bobs}"}).json() == no_token
    # the probe token opens no image
    assert client.get(f"/iiif/3/{image_id}/info.json", headers=token).status_code in (401, 404)
