"""A harvested issue as a package folder in the shape of a Gallica/SPAR delivery.

    <folder>/manifest.xml     METS: Dublin Core (title, date, ARKs, rights), PREMIS identifiers,
                              a fileSec with the MD5 and size of every delivered file, the
                              physical pages in order with their printed numbers, and each
                              page's IIIF image service (not delivered: a URL)
    <folder>/toc/T<id>.xml    the table of contents, when Gallica has one for the issue
    <folder>/ocr/X<nnnnnnn>.xml  the ALTO of each view

It is what the release reads for any delivered package (its METS, fixity, articles), so a
harvested issue and a delivered one go through the same ingest. The folder is written beside
its final place and renamed into it, and is byte-for-byte the same for the same answers (no
harvest time in it): harvesting an unchanged issue again changes nothing downstream.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from pydantic import BaseModel

from schemas.harvest import ark_name
from tasks.harvest.gallica import IssueRecord, PageView

NS = {"": "http://www.loc.gov/METS/", "dc": "http://purl.org/dc/elements/1.1/",
      "dcterms": "http://purl.org/dc/terms/", "spar_dc": "http://bibnum.bnf.fr/ns/spar_dc",
      "premis": "info:lc/xmlns/premis-v2", "xlink": "http://www.w3.org/1999/xlink",
      "xsi": "http://www.w3.org/2001/XMLSchema-instance"}
for _prefix, _uri in NS.items():
    ET.register_namespace(_prefix, _uri)


def q(name: str) -> str:
    prefix, _, local = name.rpartition(":")
    return f"{{{NS[prefix]}}}{local}"


class IssuePackage(BaseModel):
    """Everything a package folder is written from."""

    ark: str  # ark:/12148/bpt6k…
    title_ark: str | None
    record: IssueRecord
    views: list[PageView]
    alto: dict[int, bytes]  # view order → ALTO bytes
    toc: bytes | None = None
    image_services: dict[int, str] = {}


def ocr_name(order: int) -> str:
    return f"ocr/X{order:07d}.xml"


def manifest_xml(package: IssuePackage) -> bytes:
    name = ark_name(package.ark)
    mets = ET.Element(q("mets"))
    header = ET.SubElement(mets, q("metsHdr"), ID="HDR.1")
    ET.SubElement(header, q("altRecordID"), TYPE="producerIdentifier").text = "mabillon-harvest"
    ET.SubElement(header, q("altRecordID"), TYPE="productionIdentifier").text = name
    if package.title_ark:
        dmd = ET.SubElement(mets, q("dmdSec"), ID="DMD.1")
        ET.SubElement(dmd, q("mdRef"), {"LOCTYPE": "ARK", q("xlink:type"): "simple",
                                        q("xlink:href"): package.title_ark, "MDTYPE": "DC",
                                        "MIMETYPE": "text/xml",
                                        **({"LABEL": package.record.title} if package.record.title else {})})
    dc = ET.SubElement(ET.SubElement(ET.SubElement(ET.SubElement(
        mets, q("dmdSec"), ID="DMD.2"), q("mdWrap"), MIMETYPE="text/xml", MDTYPE="DC"),
        q("xmlData")), q("spar_dc:spar_dc"))
    record = package.record
    for field, value in (("title", record.title), ("type", "periodical"), ("date", record.date),
                         ("publisher", record.publisher), ("language", record.language)):
        if value:
            ET.SubElement(dc, q(f"dc:{field}")).text = value
    ET.SubElement(dc, q("dc:identifier"), {q("xsi:type"): "spar_dc:ark"}).text = package.ark
    if package.title_ark:
        ET.SubElement(dc, q("dc:relation"), {q("xsi:type"): "spar_dc:ark"}).text = package.title_ark
    for right in record.rights:
        ET.SubElement(dc, q("dc:rights")).text = right
    if record.visibility:
        ET.SubElement(dc, q("dcterms:accessRights")).text = record.visibility
    ET.SubElement(dc, q("dcterms:provenance")).text = record.provenance or "BnF"
    for view in package.views:
        if view.label:
            page_dc = ET.SubElement(ET.SubElement(ET.SubElement(ET.SubElement(
                mets, q("dmdSec"), ID=f"DMD.P{view.order}"), q("mdWrap"), MIMETYPE="text/xml", MDTYPE="DC"),
                q("xmlData")), q("spar_dc:spar_dc"))
            ET.SubElement(page_dc, q("dc:title"), {q("xsi:type"): "spar_dc:paginationA"}).text = view.label

    amd = ET.SubElement(mets, q("amdSec"))
    obj = ET.SubElement(ET.SubElement(ET.SubElement(ET.SubElement(amd, q("techMD"), ID="AMD.1"),
                                                    q("mdWrap"), MDTYPE="PREMIS:OBJECT", MIMETYPE="text/xml"),
                                      q("xmlData")), q("premis:object"), {q("xsi:type"): "premis:representation"})
    for kind, value in (("ark", package.ark), ("productionIdentifier", name)):
        ident = ET.SubElement(obj, q("premis:objectIdentifier"))
        ET.SubElement(ident, q("premis:objectIdentifierType")).text = kind
        ET.SubElement(ident, q("premis:objectIdentifierValue")).text = value
    if package.title_ark:
        rel = ET.SubElement(obj, q("premis:relationship"))
        ET.SubElement(rel, q("premis:relationshipType")).text = "structural"
        ET.SubElement(rel, q("premis:relationshipSubType")).text = "isPartOf"
        related = ET.SubElement(rel, q("premis:relatedObjectIdentification"))
        ET.SubElement(related, q("premis:relatedObjectIdentifierType")).text = "ark"
        ET.SubElement(related, q("premis:relatedObjectIdentifierValue")).text = package.title_ark

    files = ET.SubElement(mets, q("fileSec"))
    ocr = ET.SubElement(files, q("fileGrp"), USE="ocr", ID="GRP.OCR")
    for view in package.views:
        data = package.alto[view.order]
        file = ET.SubElement(ocr, q("file"), ID=f"ocr.{view.order}", MIMETYPE="text/xml",
                             CHECKSUMTYPE="MD5", CHECKSUM=hashlib.md5(data).hexdigest(), SIZE=str(len(data)))
        ET.SubElement(file, q("FLocat"), {"LOCTYPE": "URL", q("xlink:type"): "simple",
                                          q("xlink:href"): ocr_name(view.order)})
    if package.toc is not None:
        toc = ET.SubElement(files, q("fileGrp"), USE="toc", ID="GRP.TOC")
        file = ET.SubElement(toc, q("file"), ID="toc.1", MIMETYPE="text/xml", CHECKSUMTYPE="MD5",
                             CHECKSUM=hashlib.md5(package.toc).hexdigest(), SIZE=str(len(package.toc)))
        ET.SubElement(file, q("FLocat"), {"LOCTYPE": "URL", q("xlink:type"): "simple",
                                          q("xlink:href"): f"toc/T{name}.xml"})
    if package.image_services:
        # the page images stay at the library: each page names its IIIF Image service
        iiif = ET.SubElement(files, q("fileGrp"), USE="iiif", ID="GRP.IIIF")
        for order, service in sorted(package.image_services.items()):
            file = ET.SubElement(iiif, q("file"), ID=f"iiif.{order}", MIMETYPE="application/ld+json")
            ET.SubElement(file, q("FLocat"), {"LOCTYPE": "URL", q("xlink:type"): "simple",
                                              q("xlink:href"): service})

    physical = ET.SubElement(mets, q("structMap"), TYPE="physical")
    group = ET.SubElement(ET.SubElement(physical, q("div"), TYPE="set", ID="DIV.1",
                                        **({"DMDID": "DMD.1"} if package.title_ark else {})),
                          q("div"), TYPE="group", ID="DIV.2", DMDID="DMD.2", ADMID="AMD.1")
    for view in package.views:
        attrs = {"TYPE": "object", "ORDER": str(view.order), "ID": f"DIV.P{view.order}"}
        if view.label:
            attrs.update(ORDERLABEL=view.label, DMDID=f"DMD.P{view.order}")
        page = ET.SubElement(group, q("div"), attrs)
        ET.SubElement(page, q("fptr"), FILEID=f"ocr.{view.order}")
        if view.order in package.image_services:
            ET.SubElement(page, q("fptr"), FILEID=f"iiif.{view.order}")
    if package.toc is not None:
        toc_map = ET.SubElement(mets, q("structMap"), TYPE="toc")
        ET.SubElement(ET.SubElement(toc_map, q("div"), TYPE="group", ID="DIV.T", DMDID="DMD.2"),
                      q("fptr"), FILEID="toc.1")
    ET.indent(mets, space=" ")
    return ET.tostring(mets, encoding="utf-8", xml_declaration=True) + b"\n"


def package_files(package: IssuePackage) -> dict[str, bytes]:
    """Relative path → bytes of every file of the package folder."""
    files = {"manifest.xml": manifest_xml(package)}
    files.update({ocr_name(v.order): package.alto[v.order] for v in package.views})
    if package.toc is not None:
        files[f"toc/T{ark_name(package.ark)}.xml"] = package.toc
    return files


def write_package(package: IssuePackage, folder: Path) -> bool:
    """Write the package folder; False when it already holds exactly these files (untouched).
    The caller holds the home's harvest lock: nobody else writes beside it."""
    files = package_files(package)
    if folder.is_dir() and {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} == set(files) \
            and all((folder / rel).read_bytes() == data for rel, data in files.items()):
        return False
    folder.parent.mkdir(parents=True, exist_ok=True)
    for stale in folder.parent.glob(f".{folder.name}.*"):  # left by a harvest killed while writing
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        for rel, data in files.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).write_bytes(data)
        if folder.exists():  # an earlier answer set: replaced whole, never mixed
            retired = folder.with_name(f".{folder.name}.old")
            shutil.rmtree(retired, ignore_errors=True)
            folder.rename(retired)
            staging.rename(folder)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return True
