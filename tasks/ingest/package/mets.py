"""METS documents of an issue package: what files they list (with checksums), the physical pages
in order, the logical articles with the ALTO blocks they name, and the bibliographic data (MODS,
Dublin Core, PREMIS identifiers) of the issue and its title.

A METS is recognised by its root element in the METS namespace, never by its file name. Works
for the Europeana Newspapers profile (ENMAP: MODS per issue and article in one METS), BnF's
Gallica/SPAR packages (`manifest.xml` with Dublin Core and ARKs, the table of contents a second
METS with MODS articles) and the METS/MODS/ALTO shape other libraries deliver.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from datetime import date as date_type
from urllib.parse import unquote
from xml.etree.ElementTree import Element

from defusedxml import ElementTree as SafeET
from defusedxml.common import DefusedXmlException

METS_NS = "http://www.loc.gov/METS/"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
XSI_TYPE = "{http://www.w3.org/2001/XMLSchema-instance}type"
ARK = re.compile(r"ark:/\d{5}/[A-Za-z0-9=~*+@_$.-]+")
_ROOT = re.compile(rb"<(?![?!])([\w.-]+:)?mets[\s>/]")
ARTICLE_TYPES = {"article"}
SECTION_TYPES = {"section"}


class MetsError(ValueError):
    """The METS cannot be read as an issue package; the message says why."""


def local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def looks_like_mets(head: bytes) -> bool:
    """Cheap test on the first bytes: an XML document whose root is <mets> (any prefix) in the
    METS namespace."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"<"):
        return False
    root = _ROOT.search(text[:4096])
    return bool(root) and METS_NS.encode() in text[:4096]


@dataclass(frozen=True)
class MetsFile:
    file_id: str
    path: str | None  # resolved inside the package root (POSIX); None: outside it, or not a local href
    href: str
    mimetype: str | None
    use: str  # the USE of its file groups, innermost last ("TextGroup/content")
    checksum: str | None
    checksum_type: str | None
    size: int | None


@dataclass(frozen=True)
class PhysicalPage:
    order: int
    label: str | None
    file_ids: tuple[str, ...]


@dataclass(frozen=True)
class Area:
    file_id: str
    begin: str | None  # the ALTO element ID (TextBlock, ComposedBlock or Page); None: the whole file


@dataclass
class LogicalArticle:
    div_id: str
    div_type: str
    label: str | None
    dmd_ids: tuple[str, ...]
    section: str | None
    areas: list[Area]
    title: str | None = None
    subtitle: str | None = None
    authors: list[str] = field(default_factory=list)
    genre: str | None = None


@dataclass
class MetsDoc:
    path: str  # inside the package root
    profile: str | None
    label: str | None
    files: dict[str, MetsFile]
    pages: list[PhysicalPage]
    articles: list[LogicalArticle]
    has_logical: bool
    issue: dict[str, object]  # title, date, number, edition, identifiers, rights, arks


def _text(node: Element | None) -> str | None:
    if node is None or node.text is None:
        return None
    value = " ".join(node.text.split())
    return value or None


def _find_all(node: Element, name: str) -> list[Element]:
    return [n for n in node.iter() if local(n.tag) == name]


def _first(node: Element, name: str) -> Element | None:
    return next((n for n in node.iter() if local(n.tag) == name), None)


def resolve_href(href: str, mets_path: str) -> str | None:
    """A FLocat href as a path inside the package root, or None when it leaves it or is remote."""
    value = unquote(href.strip())
    if value.startswith("file://"):
        value = value[len("file://"):]
    if re.match(r"^[a-z][a-z0-9+.-]*:", value, re.IGNORECASE):
        return None  # http:, ark:, ...
    value = value.replace("\\", "/")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(mets_path), value.lstrip("/")))
    if joined.startswith("../") or joined == ".." or joined.startswith("/"):
        return None
    return joined


def iso_date(value: str | None) -> str | None:
    """An issue date as YYYY-MM-DD: ISO, DD.MM.YYYY or DD/MM/YYYY; None when it is not a full date."""
    if not value:
        return None
    value = value.strip()
    for pattern, order in ((r"^(\d{4})-(\d{2})-(\d{2})", "ymd"), (r"^(\d{1,2})[./](\d{1,2})[./](\d{4})$", "dmy"),
                           (r"^(\d{4})(\d{2})(\d{2})$", "ymd")):
        if m := re.match(pattern, value):
            y, mo, d = (m.group(1), m.group(2), m.group(3)) if order == "ymd" else (m.group(3), m.group(2), m.group(1))
            try:
                return date_type(int(y), int(mo), int(d)).isoformat()
            except ValueError:
                return None
    return None


def _mods_title(mods: Element) -> tuple[str | None, str | None]:
    info = _first(mods, "titleInfo")
    return (None, None) if info is None else _title_info(info)


def _title_info(info: Element) -> tuple[str | None, str | None]:
    parts = [t for t in (_text(_first(info, "nonSort")), _text(_first(info, "title"))) if t]
    return (" ".join(parts) or None), _text(_first(info, "subTitle"))


def _mods_authors(mods: Element) -> list[str]:
    names = []
    for name in _find_all(mods, "name"):
        parts = [_text(p) for p in name if local(p.tag) == "namePart"]
        full = " ".join(p for p in parts if p)
        if full:
            names.append(full)
    return names


def _read_files(root: Element, mets_path: str) -> dict[str, MetsFile]:
    files: dict[str, MetsFile] = {}

    def walk(group: Element, uses: tuple[str, ...]) -> None:
        for child in group:
            name = local(child.tag)
            if name == "fileGrp":
                walk(child, uses + ((child.get("USE") or child.get("ID") or ""),))
            elif name == "file":
                locat = next((n for n in child if local(n.tag) == "FLocat"), None)
                href = (locat.get(XLINK_HREF) or locat.get("href") or "") if locat is not None else ""
                size = child.get("SIZE")
                files[child.get("ID", "")] = MetsFile(
                    file_id=child.get("ID", ""), href=href, path=resolve_href(href, mets_path) if href else None,
                    mimetype=child.get("MIMETYPE"), use="/".join(u for u in uses if u),
                    checksum=(child.get("CHECKSUM") or "").strip().lower() or None,
                    checksum_type=child.get("CHECKSUMTYPE"), size=int(size) if size and size.isdigit() else None)
                walk(child, uses)  # nested files
    for sec in root:
        if local(sec.tag) == "fileSec":
            walk(sec, ())
    return files


def _fptr_file_ids(div: Element) -> list[str]:
    """Files a div points at directly (its own fptrs, not its children's)."""
    ids = []
    for fptr in div:
        if local(fptr.tag) != "fptr":
            continue
        if fptr.get("FILEID"):
            ids.append(fptr.get("FILEID"))
        ids.extend(a.get("FILEID") for a in fptr.iter() if local(a.tag) == "area" and a.get("FILEID"))
    return ids


def _struct_maps(root: Element, kind: str) -> list[Element]:
    return [s for s in root if local(s.tag) == "structMap" and (s.get("TYPE") or "").lower() == kind]


def _read_pages(root: Element) -> list[PhysicalPage]:
    pages: list[PhysicalPage] = []
    for smap in _struct_maps(root, "physical"):
        for div in smap.iter():
            if local(div.tag) != "div":
                continue
            ids = _fptr_file_ids(div)
            if not ids:
                continue
            order = div.get("ORDER")
            pages.append(PhysicalPage(order=int(order) if order and order.isdigit() else len(pages) + 1,
                                      label=div.get("ORDERLABEL") or div.get("LABEL"), file_ids=tuple(ids)))
    pages.sort(key=lambda p: p.order)
    return pages


def _areas(div: Element) -> list[Area]:
    return [Area(file_id=a.get("FILEID", ""), begin=a.get("BEGIN")) for a in div.iter()
            if local(a.tag) == "area" and a.get("FILEID")]


def _read_articles(root: Element, dmd: dict[str, Element]) -> tuple[list[LogicalArticle], bool]:
    maps = _struct_maps(root, "logical")
    articles: list[LogicalArticle] = []

    def walk(div: Element, section: str | None) -> None:
        for child in div:
            if local(child.tag) != "div":
                continue
            kind = (child.get("TYPE") or "").lower()
            if kind in ARTICLE_TYPES:
                dmd_ids = tuple((child.get("DMDID") or "").split())
                art = LogicalArticle(div_id=child.get("ID", f"article{len(articles) + 1}"), div_type=kind,
                                     label=child.get("LABEL"), dmd_ids=dmd_ids, section=section,
                                     areas=_areas(child))
                for ref in dmd_ids:
                    mods = dmd.get(ref)
                    if mods is None:
                        continue
                    title, subtitle = _mods_title(mods)
                    art.title, art.subtitle = art.title or title, art.subtitle or subtitle
                    art.authors = art.authors or _mods_authors(mods)
                    art.genre = art.genre or _text(_first(mods, "classification")) or _text(_first(mods, "genre"))
                articles.append(art)
                continue  # an article inside an article is part of it
            label = section
            if kind in SECTION_TYPES:
                sec_title = next((_mods_title(dmd[r])[0] for r in (child.get("DMDID") or "").split() if r in dmd), None)
                label = sec_title or child.get("LABEL") or section
            walk(child, label)
    for smap in maps:
        walk(smap, None)
    return articles, bool(maps)


def _issue_data(root: Element, dmd: dict[str, Element]) -> dict[str, object]:
    """Title, date, number and identifiers of the issue, whatever the metadata schema."""
    out: dict[str, object] = {"identifiers": {}}
    ids: dict[str, str] = out["identifiers"]  # type: ignore[assignment]
    titles, dates, rights = [], [], []
    for sec_id, md in dmd.items():
        for node in md.iter():
            name = local(node.tag)
            if name == "titleInfo" and _text(_first(node, "title")):
                titles.append((sec_id, _title_info(node)[0], _text(_first(node, "partNumber"))))
            elif name == "dateIssued" or (name == "date" and "purl.org/dc" in node.tag):
                dates.append(_text(node))
            elif name == "edition":
                out.setdefault("edition", _text(node))
            elif name == "identifier" and _text(node):
                key = node.get("type") or ("dc" if "purl.org/dc" in node.tag else "id")
                ids.setdefault(key, _text(node))  # type: ignore[arg-type]
            elif name == "accessCondition" and _text(node):
                rights.append(_text(node))
            elif name == "rights" and _text(node):
                rights.append(_text(node))
            elif name == "relation" and _text(node) and ARK.fullmatch(_text(node) or ""):
                out.setdefault("title_ark", _text(node))
            elif name == "description" and (node.get(XSI_TYPE) or "").endswith("sequentialDesignation2"):
                out.setdefault("number", re.sub(r"^\D+", "", _text(node) or "") or _text(node))
            elif name == "title" and "purl.org/dc" in node.tag and _text(node):
                out.setdefault("dc_title", _text(node))
    # DMD sections that are references to a record by ARK (Gallica: the title's set)
    for sec in root:
        if local(sec.tag) == "dmdSec":
            for ref in sec:
                if local(ref.tag) == "mdRef" and (ref.get("LOCTYPE") or "").upper() == "ARK":
                    out.setdefault("set_ark", ref.get(XLINK_HREF))
    # PREMIS: the ARK of the representation (the issue in Gallica)
    for obj in _find_all(root, "object"):
        if not (obj.get(XSI_TYPE) or "").endswith("representation"):
            continue
        for oid in _find_all(obj, "objectIdentifier"):
            kind, value = _text(_first(oid, "objectIdentifierType")), _text(_first(oid, "objectIdentifierValue"))
            if kind == "ark" and value:
                out.setdefault("ark", value)
            elif kind and value:
                ids.setdefault(kind, value)
        break
    for key, value in list(ids.items()):
        if ARK.fullmatch(value) and "ark" not in out and key.lower() in ("ark", "uri", "local", "dc"):
            out["ark"] = value
    if titles:
        out["title"] = titles[0][1]
        out.setdefault("number", next((t[2] for t in titles if t[2]), None))
    if dates:
        out["date"] = next((d for d in (iso_date(x) for x in dates) if d), None)
    if rights:
        out["rights"] = rights[0]
    return out


def read_mets(data: bytes, path: str) -> MetsDoc:
    try:
        root = SafeET.fromstring(data)
    except DefusedXmlException as exc:
        raise MetsError(f"METS with entity or DTD declarations refused: {exc}") from None
    except SafeET.ParseError as exc:
        raise MetsError(f"malformed METS XML: {exc}") from None
    if local(root.tag) != "mets":
        raise MetsError(f"not METS: root element is <{local(root.tag)}>")
    dmd: dict[str, Element] = {}
    for sec in root:
        if local(sec.tag) == "dmdSec" and sec.get("ID"):
            wrap = _first(sec, "xmlData")
            if wrap is not None:
                dmd[sec.get("ID")] = wrap
    articles, has_logical = _read_articles(root, dmd)
    # The issue's own dmd: the one the logical ISSUE div or the physical root names, else all
    issue = _issue_data(root, _issue_dmd(root, dmd))
    return MetsDoc(path=path, profile=root.get("PROFILE"), label=root.get("LABEL"), files=_read_files(root, path),
                   pages=_read_pages(root), articles=articles, has_logical=has_logical, issue=issue)


def _issue_dmd(root: Element, dmd: dict[str, Element]) -> dict[str, Element]:
    """The descriptive sections of the issue and its title: not those of its articles."""
    article_refs = {r for div in root.iter() if local(div.tag) == "div"
                    and (div.get("TYPE") or "").lower() in ARTICLE_TYPES | SECTION_TYPES
                    for r in (div.get("DMDID") or "").split()}
    picked = {k: v for k, v in dmd.items() if k not in article_refs}
    # issue-level sections first (ENMAP: MODSMD_ISSUE1 before MODSMD_PRINT), for the title and number
    issue_refs = [r for div in root.iter() if local(div.tag) == "div" and (div.get("TYPE") or "").lower() == "issue"
                  for r in (div.get("DMDID") or "").split()]
    ordered = {k: picked[k] for k in issue_refs if k in picked}
    ordered.update(picked)
    return ordered
