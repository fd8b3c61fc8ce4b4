"""An issue package as documents: found by its METS in a folder, verified, read into articles.

`find_packages` looks at a folder's files (the first bytes of each, not their names) for METS
documents; a METS whose physical structure points at ALTO pages roots a package, and another METS
that lists the same files (Gallica's table of contents) joins it with its logical structure.
`read_package` verifies fixity, reads each ALTO page once (streaming) and returns one
`ArticleRecord` per logical article, one per page for the text outside any article (mastheads,
adverts, kept apart), or one per page when the METS has no logical structure.
"""
from __future__ import annotations

import hashlib
import json
import posixpath
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.package import AltoBlock, ArticlePage, ArticleRecord, IssuePage
from tasks.ingest.package.alto_stream import AltoError, AltoPage, read_alto_page
from tasks.ingest.package.fixity import (Expected, FixityError, algorithm, checksum_manifest_algorithm,
                                         read_checksum_manifest, verify)
from tasks.ingest.package.mets import LogicalArticle, MetsDoc, MetsError, MetsFile, looks_like_mets, read_mets

GALLICA_NAAN = "12148"  # BnF's ARKs: its IIIF Image API serves every page of a digitised issue
GALLICA_IIIF = "https://gallica.bnf.fr/iiif/"
IMAGE_EXTENSIONS = (".jp2", ".j2k", ".tif", ".tiff", ".jpg", ".jpeg", ".png", ".gif", ".pdf")
TITLE_WORDS = 12
IIIF_CONTEXT = b"iiif.io/api/presentation"
BAG_TAG_FILES = {"bagit.txt", "bag-info.txt"}  # a BagIt bag's own declarations travel with its package


class PackageRefused(ValueError):
    """The package is damaged or unreadable; the whole package is refused with this reason."""


@dataclass
class FoundPackage:
    root: MetsDoc
    others: list[MetsDoc] = field(default_factory=list)  # METS that add logical structure
    files: set[str] = field(default_factory=set)  # delivered files that belong to the package
    iiif_title: str | None = None  # the title a IIIF manifest delivered with it gives (Gallica's)

    @property
    def mets_paths(self) -> list[str]:
        return [self.root.path] + [m.path for m in self.others]


@dataclass(frozen=True)
class Overrides:
    """What a sidecar row naming the package's METS says (it wins over the package's own data)."""

    corpus: str | None = None
    newspaper: str | None = None
    date: str | None = None
    doc_id_prefix: str | None = None
    metadata: dict = field(default_factory=dict)


Reader = Callable[[str], bytes]


def slug(text: str) -> str:
    """`Le Gaulois` → `le_gaulois`; accents folded, anything else an underscore."""
    folded = unicodedata.normalize("NFKD", text.replace("œ", "oe").replace("Œ", "Oe"))
    ascii_text = folded.encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "_", ascii_text).strip("_") or "newspaper"


def _is_text_file(f: MetsFile) -> bool:
    return not (f.mimetype or "").lower().startswith("image/") and not (f.path or "").lower().endswith(IMAGE_EXTENSIONS)


def find_packages(rels: list[str], head: Callable[[str], bytes],
                  read: Reader) -> tuple[list[FoundPackage], dict[str, str]]:
    """Packages among a folder's files (POSIX paths relative to it), and METS that could not be read
    (path → reason). `head(path)` gives a file's first bytes, `read(path)` all of them."""
    docs: list[MetsDoc] = []
    refused: dict[str, str] = {}
    for rel in rels:
        if rel.lower().endswith(IMAGE_EXTENSIONS):
            continue
        try:
            if not looks_like_mets(head(rel)):
                continue
            docs.append(read_mets(read(rel), rel))
        except MetsError as exc:
            refused[rel] = f"issue package METS unreadable: {exc}"
        except OSError as exc:
            refused[rel] = f"unreadable: {exc}"
    delivered = set(rels)
    roots = [d for d in docs if any(_is_text_file(d.files[i]) for p in d.pages for i in p.file_ids if i in d.files)]
    packages = [FoundPackage(root=r) for r in roots]
    for doc in docs:
        if any(doc is r for r in roots):
            continue
        paths = {f.path for f in doc.files.values() if f.path}
        owner = next((p for p in packages if paths & {f.path for f in p.root.files.values() if f.path}
                      or doc.path in {f.path for f in p.root.files.values()}), None)
        if owner is not None:
            owner.others.append(doc)
        # a lone METS without pages is not a package: it is left to the ordinary walk
    for pkg in packages:
        files = set(pkg.mets_paths)
        for doc in [pkg.root, *pkg.others]:
            for f in doc.files.values():
                if f.path and f.path in delivered:
                    files.add(f.path)
                if f.path and f.path + ".gz" in delivered:
                    files.add(f.path + ".gz")
        root_dir = posixpath.dirname(pkg.root.path)
        for rel in rels:  # checksum manifests at or above the package's folder, and renamed twins
            folder = posixpath.dirname(rel)
            above = (root_dir + "/").startswith((folder + "/") if folder else "")
            if above and (checksum_manifest_algorithm(rel) or posixpath.basename(rel).lower() in BAG_TAG_FILES):
                files.add(rel)
        for rel in rels:  # a IIIF manifest fetched with the package (harvesting): its metadata, not a text
            if posixpath.dirname(rel) == root_dir and rel.lower().endswith(".json"):
                try:
                    if IIIF_CONTEXT not in head(rel):
                        continue
                    title = iiif_title(read(rel))
                except OSError:
                    continue
                files.add(rel)
                pkg.iiif_title = pkg.iiif_title or title
        pkg.files = files
    return packages, refused


def iiif_title(data: bytes) -> str | None:
    """The title a IIIF Presentation manifest gives: its "Title" metadata (Gallica's holds the
    newspaper's name, e.g. "L'Oeuvre (Paris. 1904)", its place and year dropped), else None."""
    try:
        manifest = json.loads(data)
    except ValueError:
        return None
    entries = manifest.get("metadata") if isinstance(manifest, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        label, value = (entry.get("label"), entry.get("value")) if isinstance(entry, dict) else (None, None)
        label = label if isinstance(label, str) else json.dumps(label, ensure_ascii=False)
        if isinstance(value, str) and re.search(r"\b(title|titre)\b", label or "", re.IGNORECASE):
            return re.sub(r"\s*\([^)]*\)\s*$", "", value).strip() or None
    return None


def _expected(pkg: FoundPackage, alto_pages: dict[str, int], rels: list[str], read: Reader) -> list[Expected]:
    out: list[Expected] = []
    root_dir = posixpath.dirname(pkg.root.path)
    for doc in [pkg.root, *pkg.others]:
        for f in doc.files.values():
            alg = algorithm(f.checksum_type)
            if not (f.path and f.checksum and alg):
                continue
            page = alto_pages.get(f.path)
            kind = "METS" if f.path in pkg.mets_paths else f.use.split("/")[-1] or "file"
            what = f"ALTO p.{page}" if page else kind
            out.append(Expected(path=f.path, algorithm=alg, digest=f.checksum, what=what, source=doc.path))
    for rel in sorted(r for r in pkg.files if checksum_manifest_algorithm(r)):
        for exp in read_checksum_manifest(read(rel).decode("utf-8", "replace"), rel, checksum_manifest_algorithm(rel) or "sha256"):
            if root_dir and not exp.path.startswith(root_dir + "/"):
                continue  # a manifest above several packages: each checks its own files
            page = alto_pages.get(exp.path) or alto_pages.get(exp.path.removesuffix(".gz"))
            out.append(Expected(path=exp.path, algorithm=exp.algorithm, digest=exp.digest,
                                what=f"ALTO p.{page}" if page else exp.what, source=rel))
    return out


@dataclass
class _Page:
    info: IssuePage
    alto: AltoPage


def _alto_paths(pkg: FoundPackage) -> dict[str, int]:
    """Listed ALTO path → physical page number."""
    out = {}
    for number, page in enumerate(pkg.root.pages, start=1):
        for fid in page.file_ids:
            f = pkg.root.files.get(fid)
            if f and f.path and _is_text_file(f):
                out.setdefault(f.path, number)
    return out


def _labels(pkg: FoundPackage) -> dict[int, str]:
    """Printed page numbers where the METS gives usable ones (unique in the issue)."""
    labels = {n: (p.label or "").strip() for n, p in enumerate(pkg.root.pages, start=1)}
    values = [v for v in labels.values() if v]
    if not values or len(set(values)) != len(values):
        return {}
    return {n: v for n, v in labels.items() if v}


def _image_service(ark: str | None, alto: AltoPage, page_no: int) -> str | None:
    ident = alto.file_identifier or ""
    if re.fullmatch(rf"ark:/{GALLICA_NAAN}/[\w.-]+/f\d+", ident):
        return GALLICA_IIIF + ident
    if ark and ark.startswith(f"ark:/{GALLICA_NAAN}/"):
        return f"{GALLICA_IIIF}{ark}/f{page_no}"
    return None


def _newspaper(pkg: FoundPackage, overrides: Overrides, above: tuple[str, ...]) -> tuple[str, str]:
    """The newspaper's title and where it came from."""
    if overrides.newspaper:
        return overrides.newspaper, "sidecar"
    for doc in [pkg.root, *pkg.others]:
        if title := doc.issue.get("title"):
            return str(title), "METS"
    if pkg.iiif_title:
        return pkg.iiif_title, "IIIF manifest"
    # Gallica's packages name the title only by ARK: the folder the deliverer filed it under
    parts = [*above, *(p for p in posixpath.dirname(pkg.root.path).split("/") if p)]
    for part in reversed(parts):
        if not re.fullmatch(r"[\d_.-]+", part):
            return part, "folder"
    return "newspaper", "none"


def _issue_field(pkg: FoundPackage, key: str):
    return next((d.issue[key] for d in [pkg.root, *pkg.others] if d.issue.get(key)), None)


def _words(blocks: list[AltoBlock]):
    return (w for b in blocks for line in b.lines for w in line.words)


def _confidence(blocks: list[AltoBlock]) -> float | None:
    """Mean word confidence weighted by characters, as the ALTO parser computes a page's."""
    weighted = chars = 0.0
    for w in _words(blocks):
        if w.wc is not None:
            weighted += w.wc * len(w.content)
            chars += len(w.content)
    return round(weighted / chars, 4) if chars else None


def _first_words(pages: list[ArticlePage]) -> str:
    words = [w.content for p in pages for w in _words(p.blocks)][:TITLE_WORDS]
    return " ".join(words) + ("…" if words else "")


def _usable_title(title: str | None) -> str | None:
    return title if title and re.search(r"\w", title) else None


def read_package(pkg: FoundPackage, rels: list[str], read: Reader, overrides: Overrides = Overrides(),
                 above: tuple[str, ...] = (), *, max_bytes: int) -> list[ArticleRecord]:
    """The package's documents; raises PackageRefused (fixity, an unreadable page) for the whole package.

    `above`: names of the folders holding the walked one (the last resort for a newspaper's name);
    `max_bytes`: the configured size limit a gzipped ALTO page may inflate to."""
    delivered = set(rels)
    alto_paths = _alto_paths(pkg)
    try:
        report = verify(_expected(pkg, alto_paths, rels, read), delivered, read, max_bytes)
    except FixityError as exc:
        raise PackageRefused(str(exc)) from None
    except OSError as exc:
        raise PackageRefused(f"unreadable: {exc}") from None
    pkg.files.update(report.renamed.values())  # delivered under another name: still the package's
    ark = _issue_field(pkg, "ark")
    labels = _labels(pkg)
    here = posixpath.dirname(pkg.root.path)

    def inside(path: str) -> str:  # what the record names: independent of the folder ingested
        return posixpath.relpath(path, here) if here else path

    def delivered_as(path: str) -> str:  # the name a listed file arrived under
        return report.renamed.get(path) or (path if path in delivered else path + ".gz")

    pages: dict[int, _Page] = {}
    page_of_path: dict[str, int] = {}
    for number, _ in enumerate(pkg.root.pages, start=1):
        for path, n in alto_paths.items():
            if n != number:
                continue
            actual = delivered_as(path)
            if actual not in delivered:
                # an article over that page would be published with part of its text: the package
                # waits for a complete delivery (a drop folder still being written, a failed fetch)
                raise PackageRefused(f"ALTO p.{number} ({path}) listed by the METS but not delivered: "
                                     "the issue is incomplete")
            try:
                data = read(actual)
                alto = read_alto_page(data, max_bytes=max_bytes)
            except AltoError as exc:
                raise PackageRefused(f"ALTO p.{number} ({actual}): {exc}") from None
            except OSError as exc:
                raise PackageRefused(f"ALTO p.{number} ({actual}): unreadable: {exc}") from None
            pages[number] = _Page(IssuePage(
                # `file` as the METS names it: a renamed delivery is recorded under fixity
                page_no=number, label=labels.get(number), file=inside(path), sha256=hashlib.sha256(data).hexdigest(),
                width=alto.width, height=alto.height, unit=alto.unit, scale=round(alto.scale, 6), pc=alto.pc,
                ocr_brut=alto.ocr_brut, image_service=_image_service(ark, alto, number)), alto)
            page_of_path[path] = number
            break
    if not pages:
        raise PackageRefused("issue package without any delivered ALTO page")
    newspaper, newspaper_source = _newspaper(pkg, overrides, above)
    date = overrides.date or _issue_field(pkg, "date")
    number = _issue_field(pkg, "number") or _issue_field(pkg, "edition") or "1"
    corpus = overrides.corpus or slug(newspaper)
    prefix = overrides.doc_id_prefix or f"{slug(newspaper)}/{date or 'undated'}/{slug(str(number))}"
    issue_meta = {
        "newspaper": newspaper, "newspaper_source": newspaper_source,
        "issue": {k: v for k, v in {"number": _issue_field(pkg, "number"), "edition": _issue_field(pkg, "edition"),
                                    "label": _issue_field(pkg, "dc_title") or pkg.root.label}.items() if v},
        "ark": ark, "title_ark": _issue_field(pkg, "title_ark"), "set_ark": _issue_field(pkg, "set_ark"),
        "identifiers": {k: v for d in [pkg.root, *pkg.others]
                        for k, v in d.issue["identifiers"].items()},  # type: ignore[union-attr]
        "rights": _issue_field(pkg, "rights"),
        "package": {"mets": [inside(p) for p in pkg.mets_paths], "profile": pkg.root.profile or "METS",
                    "fixity": _relative(report.summary(), inside)},
        **overrides.metadata,
    }
    issue_meta = {k: v for k, v in issue_meta.items() if v not in (None, {}, [])}
    logical = next((d for d in [pkg.root, *pkg.others] if d.articles), None)

    def record(kind: str, doc_id: str, title: str, parts: list[ArticlePage], extra: dict) -> ArticleRecord:
        meta = dict(issue_meta, kind=kind, **extra)
        meta["pages"] = [p.page.page_no for p in parts]
        if printed := {str(p.page.page_no): p.page.label for p in parts
                       if p.page.label and p.page.label != str(p.page.page_no)}:
            meta["page_labels"] = printed
        if images := {str(p.page.page_no): p.page.image_service for p in parts if p.page.image_service}:
            meta["page_images"] = images
        meta["ocr"] = {"confidence": _confidence([b for p in parts for b in p.blocks]),
                       "pages": {str(p.page.page_no): {k: v for k, v in {
                           "wc": _confidence(p.blocks), "pc": p.page.pc, "ocr_brut": p.page.ocr_brut}.items()
                           if v is not None} for p in parts}}
        meta["source_files"] = [{"path": p.page.file, "sha256": p.page.sha256,
                                 "fixity": sorted(set(report.verified.get(
                                     delivered_as(posixpath.join(here, p.page.file)), [])))}
                                for p in parts]
        return ArticleRecord(kind=kind, doc_id=doc_id, corpus=corpus, date=date, title=title, metadata=meta,
                             pages=parts)

    records: list[ArticleRecord] = []
    claimed: dict[int, set[str]] = {n: set() for n in pages}
    if logical is not None:
        for ordinal, art in enumerate(logical.articles, start=1):
            parts = _article_pages(art, logical, pages, page_of_path, report.renamed)
            for part in parts:
                claimed[part.page.page_no].update(b.block_id for b in part.blocks)
            if not any(part.blocks for part in parts):
                continue
            named = _usable_title(art.title) or _usable_title(art.label)
            extra = {k: v for k, v in {"article_id": art.div_id, "authors": art.authors, "section": art.section,
                                       "subtitle": art.subtitle, "genre": art.genre,
                                       "title_source": "METS" if named else "text"}.items() if v}
            title = named or _first_words(parts)
            records.append(record("article", f"{prefix}/a{ordinal:03d}", title, parts, extra))
    kind = "outside_articles" if logical is not None else "page"
    for number, page in sorted(pages.items()):
        blocks = [b for bid, b in page.alto.blocks.items() if bid not in claimed[number] and b.lines]
        if not blocks:
            continue
        shown = page.info.label or str(number)
        title = (f"{newspaper}, {date or 'undated'}, page {shown}" +
                 (" (outside articles)" if logical is not None else ""))
        records.append(record(kind, f"{prefix}/p{number}", title, [ArticlePage(page=page.info, blocks=blocks)], {}))
    return records


def _relative(summary: dict, inside: Callable[[str], str]) -> dict:
    out = dict(summary, not_delivered=[inside(p) for p in summary["not_delivered"]])
    if "renamed" in summary:
        out["renamed"] = {inside(k): inside(v) for k, v in summary["renamed"].items()}
    return out


def _article_pages(art: LogicalArticle, logical: MetsDoc, pages: dict[int, _Page], page_of_path: dict[str, int],
                   renamed: dict[str, str]) -> list[ArticlePage]:
    """The article's blocks, page by page, in the order its areas name them (each block once)."""
    by_page: dict[int, ArticlePage] = {}
    seen: set[tuple[int, str]] = set()
    for area in art.areas:
        f = logical.files.get(area.file_id)
        number = page_of_path.get(f.path) if f and f.path else None
        if number is None or number not in pages:
            continue
        alto = pages[number].alto
        if area.begin is None:
            ids = list(alto.blocks)
        elif area.begin in alto.blocks:
            ids = [area.begin]
        else:
            ids = alto.groups.get(area.begin, [])
        part = by_page.get(number)
        for bid in ids:
            if (number, bid) in seen or not alto.blocks[bid].lines:
                continue
            seen.add((number, bid))
            if part is None:
                part = by_page[number] = ArticlePage(page=pages[number].info, blocks=[])
            part.blocks.append(alto.blocks[bid])
    return list(by_page.values())
