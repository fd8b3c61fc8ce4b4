"""Gallica's documented services: where each is, and what its answer says.

- `SRU?operation=searchRetrieve&version=1.2&query=CQL&startRecord=&maximumRecords=&collapsing=false`
  (api.bnf.fr, "API de recherche de Gallica"): `srw:searchRetrieveResponse` with
  `srw:numberOfRecords` and `srw:records/srw:record/srw:recordData/oai_dc:dc/dc:identifier`
  (https://gallica.bnf.fr/ark:/12148/…). `collapsing=false` lists a periodical's issues.
- `services/Issues?ark=ark:/12148/<title>/date&date=YYYY` ("API Document de Gallica"):
  `<issues parentArk=… date=YYYY><issue ark="bpt6k…" dayOfYear="n">label</issue>…</issues>`.
- `services/OAIRecord?ark=<ark>`: `<results><visibility_rights/><notice><record><metadata>
  <oai_dc:dc>…</oai_dc:dc></metadata></record></notice><provenance/><typedoc/><title/>…</results>`.
- `services/Pagination?ark=<name>`: `<livre><structure><nbVueImages>n</nbVueImages>…</structure>
  <pages><page><numero/><ordre/><pagination_type/><image_width/><image_height/></page>…</pages></livre>`.
- `services/Toc?ark=<name>`: the issue's table of contents, where it has one.
- `RequestDigitalElement?O=<name>&E=ALTO&Deb=<n>`: the ALTO of view n.
- `iiif/ark:/12148/<name>/manifest.json`: the IIIF Presentation manifest (2.1 at Gallica; 3 read
  too): one canvas a view, its image's service id (`…/iiif/ark:/12148/<name>/f<n>`).

Parsers are defused (no entities, no network) and raise ValueError on an answer that is not the
shape the service documents; the client then tries again, and then quarantines the issue.
"""
from __future__ import annotations

import json
from datetime import date, timedelta

from defusedxml import ElementTree as SafeET
from pydantic import BaseModel

from schemas.harvest import NAAN, IssueRef, ark_name, arks_in


def local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def parse_xml(data: bytes, root_name: str | None = None):
    try:
        root = SafeET.fromstring(data)
    except Exception as exc:  # ParseError, entities refused, DTD: all "not what the service answers"
        raise ValueError(f"not well-formed XML ({type(exc).__name__}: {exc})") from None
    if root_name is not None and local(root.tag) != root_name:
        raise ValueError(f"expected <{root_name}>, got <{local(root.tag)}>")
    return root


def children(node, name: str):
    return [c for c in node.iter() if local(c.tag) == name]


def first_text(node, name: str) -> str | None:
    for c in node.iter():
        if local(c.tag) == name and c.text and c.text.strip():
            return c.text.strip()
    return None


# --- where ------------------------------------------------------------------------------------

def sru_params(query: str, start: int, page_size: int) -> dict:
    return {"operation": "searchRetrieve", "version": "1.2", "query": query,
            "startRecord": str(start), "maximumRecords": str(page_size), "collapsing": "false"}


def issues_params(title_ark: str, year: int) -> dict:
    return {"ark": f"ark:/{NAAN}/{ark_name(title_ark)}/date", "date": str(year)}


def alto_params(ark: str, view: int) -> dict:
    return {"O": ark_name(ark), "E": "ALTO", "Deb": str(view)}


def manifest_path(ark: str) -> str:
    return f"/iiif/ark:/{NAAN}/{ark_name(ark)}/manifest.json"


# --- what it says -----------------------------------------------------------------------------

def parse_sru(data: bytes) -> tuple[int, list[IssueRef]]:
    """(numberOfRecords, the digitised documents of this page). Records naming no bpt6k/btv1b
    document ARK (a title's catalogue record) are skipped."""
    root = parse_xml(data, "searchRetrieveResponse")
    total = first_text(root, "numberOfRecords")
    if total is None or not total.isdigit():
        diagnostic = first_text(root, "message")
        raise ValueError(f"SRU answer without numberOfRecords{f': {diagnostic}' if diagnostic else ''}")
    found: list[IssueRef] = []
    for record in children(root, "record"):
        names = [n for ident in children(record, "identifier") for n in arks_in(ident.text or "")]
        documents = [n for n in names if not n.startswith("cb")]
        if documents:
            found.append(IssueRef(ark=f"ark:/{NAAN}/{documents[0]}"))
    return int(total), found


def parse_issues(data: bytes) -> list[IssueRef]:
    """The issues of one year, dated from `dayOfYear` (1 = 1 January of the answer's year)."""
    root = parse_xml(data, "issues")
    year = root.get("date")
    out = []
    for issue in children(root, "issue"):
        name, day = issue.get("ark"), issue.get("dayOfYear")
        if not name:
            raise ValueError("<issue> without ark")
        when = None
        if year and year.isdigit() and day and day.isdigit():
            when = date(int(year), 1, 1) + timedelta(days=int(day) - 1)
        out.append(IssueRef(ark=f"ark:/{NAAN}/{ark_name(name)}", date=when))
    return out


class PageView(BaseModel):
    order: int  # the view's place in the issue (Deb=, f<n>)
    label: str | None = None  # the printed page number, when there is one
    width: int | None = None
    height: int | None = None


def parse_pagination(data: bytes) -> list[PageView]:
    root = parse_xml(data, "livre")
    views = []
    for page in children(root, "page"):
        order = first_text(page, "ordre")
        if order is None or not order.isdigit():
            raise ValueError("<page> without a numeric <ordre>")
        size = [first_text(page, n) for n in ("image_width", "image_height")]
        views.append(PageView(order=int(order), label=first_text(page, "numero"),
                              width=int(size[0]) if size[0] and size[0].isdigit() else None,
                              height=int(size[1]) if size[1] and size[1].isdigit() else None))
    if not views:
        count = first_text(root, "nbVueImages")
        if count is None or not count.isdigit():
            raise ValueError("Pagination answer with neither <page>s nor <nbVueImages>")
        views = [PageView(order=n) for n in range(1, int(count) + 1)]
    return sorted(views, key=lambda v: v.order)


class IssueRecord(BaseModel):
    """What the OAI record says about an issue (Dublin Core, repeatable fields joined by order)."""

    title: str | None = None
    date: str | None = None
    publisher: str | None = None
    language: str | None = None
    rights: list[str] = []
    relations: list[str] = []  # ARKs and links of the title, the collection
    identifiers: list[str] = []
    visibility: str | None = None  # Gallica's visibility_rights: "all" when free to read
    provenance: str | None = None


def parse_oai_record(data: bytes) -> IssueRecord:
    root = parse_xml(data, "results")
    dcs = children(root, "dc")
    if not dcs:
        raise ValueError("OAIRecord answer without an oai_dc:dc record")
    dc = dcs[0]

    def all_of(name: str) -> list[str]:
        return [c.text.strip() for c in dc if local(c.tag) == name and c.text and c.text.strip()]

    def one(name: str) -> str | None:
        values = all_of(name)
        return values[0] if values else None

    return IssueRecord(title=one("title"), date=one("date"), publisher=one("publisher"),
                       language=one("language"), rights=all_of("rights"), relations=all_of("relation"),
                       identifiers=all_of("identifier"),
                       visibility=first_text(root, "visibility_rights"),
                       provenance=first_text(root, "provenance"))


def title_ark_of(record: IssueRecord) -> str | None:
    """The periodical's ARK (ark:/12148/cb…) among the record's relations, if named."""
    for text in record.relations + record.identifiers:
        for name in arks_in(text):
            if name.startswith("cb"):
                return f"ark:/{NAAN}/{name}"
    return None


def parse_manifest_services(data: bytes) -> dict[int, str]:
    """Image service id of each canvas, by its place (1-based): Presentation 2.1
    (sequences/canvases/images/resource/service/@id) or 3 (items/items/items/body/service/id)."""
    try:
        manifest = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"IIIF manifest is not JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise ValueError("IIIF manifest is not a JSON object")
    services: dict[int, str] = {}
    sequences = manifest.get("sequences")
    if isinstance(sequences, list) and sequences:
        canvases = sequences[0].get("canvases", []) if isinstance(sequences[0], dict) else []
        for n, canvas in enumerate(canvases, 1):
            for image in canvas.get("images", []) if isinstance(canvas, dict) else []:
                service = (image.get("resource") or {}).get("service") if isinstance(image, dict) else None
                service = service[0] if isinstance(service, list) and service else service
                if isinstance(service, dict) and isinstance(service.get("@id") or service.get("id"), str):
                    services[n] = service.get("@id") or service["id"]
        return services
    items = manifest.get("items")
    if not isinstance(items, list):
        raise ValueError("IIIF manifest with neither sequences (2.1) nor items (3)")
    for n, canvas in enumerate(items, 1):
        for page in canvas.get("items", []) if isinstance(canvas, dict) else []:
            for annotation in page.get("items", []) if isinstance(page, dict) else []:
                body = annotation.get("body") if isinstance(annotation, dict) else None
                service = body.get("service") if isinstance(body, dict) else None
                service = service[0] if isinstance(service, list) and service else service
                if isinstance(service, dict) and isinstance(service.get("id") or service.get("@id"), str):
                    services[n] = service.get("id") or service["@id"]
    return services


def check_alto(data: bytes) -> None:
    """An ALTO page: well-formed, <alto> with a <Page>."""
    root = parse_xml(data, "alto")
    if not children(root, "Page"):
        raise ValueError("ALTO without a <Page>")


def check_xml(data: bytes) -> None:
    parse_xml(data)
