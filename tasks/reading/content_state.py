"""IIIF Content State API 1.0: a citation as something a viewer opens — the page's canvas, the
cited box on it, and the manifest the canvas belongs to.

The state is an annotation with motivation `contentState` whose target is the canvas with an
`#xywh=` fragment and `partOf` the manifest (§2.2). It travels in a link as `iiif-content`,
encoded as the specification says (§6): the JSON, URI-encoded (`encodeURIComponent`), then
base64url without padding, so the value survives any URL and any viewer decodes it the same.

The manifest named is the document's own (its revision manifest), not the query's: a reference
is for a colleague, who may see the document but never someone else's question.
"""
from __future__ import annotations

import base64
import json
from urllib.parse import quote, unquote

CONTEXT = "http://iiif.io/api/presentation/3/context.json"
# what encodeURIComponent leaves as it is
_URI_COMPONENT_SAFE = "-_.!~*'()"


def content_state(manifest_id: str, canvas_id: str, region: str) -> dict:
    """The annotation a viewer opens: `region` is `x,y,w,h` in canvas pixels."""
    return {
        "@context": CONTEXT,
        "id": f"{canvas_id}#xywh={region}/content-state",
        "type": "Annotation",
        "motivation": ["contentState"],
        "target": {"id": f"{canvas_id}#xywh={region}", "type": "Canvas",
                   "partOf": [{"id": manifest_id, "type": "Manifest"}]},
    }


def encode_content_state(state: dict) -> str:
    text = json.dumps(state, ensure_ascii=False, separators=(",", ":"))
    uri_encoded = quote(text, safe=_URI_COMPONENT_SAFE)
    return base64.urlsafe_b64encode(uri_encoded.encode("ascii")).decode("ascii").rstrip("=")


def decode_content_state(value: str) -> dict:
    """The inverse of encode_content_state (as a viewer reads `iiif-content`)."""
    padded = value + "=" * (-len(value) % 4)
    return json.loads(unquote(base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")))
