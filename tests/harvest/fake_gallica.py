"""A loopback Gallica for the harvest tests: a real HTTP server on 127.0.0.1 that answers the
documented services (SRU, Issues, OAIRecord, Pagination, Toc, RequestDigitalElement, IIIF
manifest) from the shared BnF samples, read at test time, and logs every request with its time.

It can be told to answer 429 with a Retry-After, 503, or a server error for one issue.

The L'Œuvre issue is served under its own ARKs (its manifest.xml names them); the Europeana
Newspapers samples have no Gallica issue ARK, so they are served under test ARKs (`bpt6ktest…`)
of their real titles.
"""
from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse
from xml.sax.saxutils import escape, quoteattr

from schemas.settings import PROJECT_ROOT

NEWSPAPERS = PROJECT_ROOT.parent / "shared" / "newspapers"


@dataclass
class FakeIssue:
    name: str  # bpt6k…
    title_name: str  # cb…
    title: str
    issued: date
    alto: list[Path]
    labels: list[str]
    toc: Path | None = None

    def page_size(self, n: int) -> tuple[str, str]:
        head = self.alto[n - 1].read_bytes()[:200_000]
        found = re.search(rb'<Page\b[^>]*?WIDTH="([\d.]+)"[^>]*?HEIGHT="([\d.]+)"', head)
        return (found.group(1).decode().split(".")[0], found.group(2).decode().split(".")[0]) if found else ("", "")


def shared_issues() -> list[FakeIssue]:
    oeuvre = NEWSPAPERS / "gallica" / "Oeuvre" / "4616238"
    labels = re.findall(r'TYPE="object" ORDERLABEL="([^"]*)"', (oeuvre / "manifest.xml").read_text("utf-8"))
    issues = [FakeIssue("bpt6k4616238h", "cb34429265b", "L'Œuvre", date(1915, 12, 1),
                        sorted((oeuvre / "ocr").glob("X*.xml")), labels, toc=oeuvre / "toc" / "T4616238.xml")]
    for folder, title_name, title, issued in (
            ("Le-Gaulois/18840430_02_1", "cb32779904b", "Le Gaulois", date(1884, 4, 30)),
            ("JDPL/18210801_1", "cb39294634r", "Journal des débats politiques et littéraires", date(1821, 8, 1))):
        pages = sorted((NEWSPAPERS / "europeana-bnf" / folder / "ALTO").glob("*.xml"))
        issues.append(FakeIssue(f"bpt6ktest{issued:%Y%m%d}", title_name, title, issued, pages,
                                [str(n) for n in range(1, len(pages) + 1)]))
    return issues


@dataclass
class Logged:
    at: float  # time.monotonic() when the request arrived
    path: str  # path?query as sent
    status: int
    user_agent: str


@dataclass
class Faults:
    failing: dict[str, int] = field(default_factory=dict)  # issue name → status for all its requests
    malformed: set[str] = field(default_factory=set)  # issue names answered with cut-off XML
    throttle: list[tuple[int, str | None]] = field(default_factory=list)  # next answers: (status, Retry-After)


class FakeGallica:
    def __init__(self, issues: list[FakeIssue] | None = None):
        self.issues = {i.name: i for i in (issues if issues is not None else shared_issues())}
        self.log: list[Logged] = []
        self.faults = Faults()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                fake._handle(self)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeGallica":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)

    # --- what the tests tell it -------------------------------------------------------------

    def fail_issue(self, name: str, status: int = 500) -> None:
        self.faults.failing[name] = status

    def malform_issue(self, name: str) -> None:
        """Every answer about this issue is cut off halfway (a proxy that drops the connection)."""
        self.faults.malformed.add(name)

    def answer_next(self, status: int, retry_after: str | None = None, times: int = 1) -> None:
        self.faults.throttle += [(status, retry_after)] * times

    def paths(self) -> list[str]:
        with self._lock:
            return [entry.path for entry in self.log]

    # --- serving ----------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        url = urlparse(handler.path)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        status, body, ctype, headers = self._answer(url.path, params)
        with self._lock:
            self.log.append(Logged(arrived, handler.path, status, handler.headers.get("User-Agent", "")))
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(body)

    def _answer(self, path: str, params: dict) -> tuple[int, bytes, str, dict]:
        with self._lock:
            if self.faults.throttle:
                status, retry_after = self.faults.throttle.pop(0)
                return status, b"<html>Too many requests</html>", "text/html", (
                    {"Retry-After": retry_after} if retry_after else {})
        name = self._issue_named(path, params)
        if name in self.faults.failing:
            return self.faults.failing[name], b"<html>Internal error</html>", "text/html", {}
        xml = "text/xml;charset=UTF-8"
        if name in self.faults.malformed:
            return 200, b'<?xml version="1.0"?><livre><structure><nbVueImages>4</nbV', xml, {}
        if path == "/SRU":
            return 200, self._sru(params), xml, {}
        if path == "/services/Issues":
            return 200, self._issues(params), xml, {}
        issue = self.issues.get(name or "")
        if issue is None:
            return 404, b"<html>Not found</html>", "text/html", {}
        if path == "/services/OAIRecord":
            return 200, self._oai(issue), xml, {}
        if path == "/services/Pagination":
            return 200, self._pagination(issue), xml, {}
        if path == "/services/Toc":
            return (200, issue.toc.read_bytes(), xml, {}) if issue.toc else (404, b"", "text/html", {})
        if path == "/RequestDigitalElement" and params.get("E") == "ALTO":
            n = int(params.get("Deb", "0"))
            if 1 <= n <= len(issue.alto):
                return 200, issue.alto[n - 1].read_bytes(), xml, {}
            return 404, b"", "text/html", {}
        if path.endswith("/manifest.json"):
            return 200, self._manifest(issue), "application/json", {}
        return 404, b"<html>Not found</html>", "text/html", {}

    def _issue_named(self, path: str, params: dict) -> str | None:
        for value in (params.get("ark"), params.get("O"), path):
            if value:
                found = re.search(r"(?:ark:/12148/)?(bpt6k[a-z0-9]+)", value)
                if found:
                    return found.group(1)
        return None

    def _sru(self, params: dict) -> bytes:
        query = params.get("query", "")
        wanted = re.search(r'dc\.title all "([^"]+)"', query)
        hits = [i for i in self.issues.values() if not wanted or wanted.group(1).lower() in i.title.lower()]
        start, size = int(params.get("startRecord", "1")), int(params.get("maximumRecords", "15"))
        page = hits[start - 1:start - 1 + size]
        records = "".join(
            f"<srw:record><srw:recordSchema>http://www.openarchives.org/OAI/2.0/oai_dc/</srw:recordSchema>"
            f"<srw:recordPacking>xml</srw:recordPacking><srw:recordData><oai_dc:dc>"
            f"<dc:identifier>https://gallica.bnf.fr/ark:/12148/{i.name}</dc:identifier>"
            f"<dc:title>{escape(i.title)}</dc:title><dc:date>{i.issued}</dc:date><dc:type>fascicule</dc:type>"
            f"</oai_dc:dc></srw:recordData><srw:recordPosition>{start + n}</srw:recordPosition></srw:record>"
            for n, i in enumerate(page))
        return (f'<?xml version="1.0" encoding="UTF-8"?><srw:searchRetrieveResponse '
                f'xmlns:srw="http://www.loc.gov/zing/srw/" xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
                f'xmlns:dc="http://purl.org/dc/elements/1.1/"><srw:version>1.2</srw:version>'
                f"<srw:numberOfRecords>{len(hits)}</srw:numberOfRecords><srw:records>{records}</srw:records>"
                f"</srw:searchRetrieveResponse>").encode()

    def _issues(self, params: dict) -> bytes:
        title = re.search(r"(cb[a-z0-9]+)", params.get("ark", ""))
        mine = [i for i in self.issues.values() if title and i.title_name == title.group(1)]
        year = params.get("date")
        parent = quoteattr(f"{title.group(1) if title else ''}/date")
        if not year:
            years = "".join(f"<year>{y}</year>" for y in sorted({i.issued.year for i in mine}))
            return f'<?xml version="1.0" encoding="UTF-8"?><issues parentArk={parent}>{years}</issues>'.encode()
        rows = "".join(f'<issue ark="{i.name}" dayOfYear="{i.issued.timetuple().tm_yday}">'
                       f"{i.issued:%d/%m/%Y}</issue>"
                       for i in sorted(mine, key=lambda i: i.issued) if str(i.issued.year) == year)
        return (f'<?xml version="1.0" encoding="UTF-8"?><issues parentArk={parent} date="{year}">'
                f"{rows}</issues>").encode()

    def _oai(self, issue: FakeIssue) -> bytes:
        return (f'<?xml version="1.0" encoding="UTF-8"?><results ResultsGenerated="1">'
                f"<visibility_rights>all</visibility_rights><notice><record><header>"
                f"<identifier>oai:bnf.fr:gallica/ark:/12148/{issue.name}</identifier></header><metadata>"
                f'<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
                f'xmlns:dc="http://purl.org/dc/elements/1.1/">'
                f"<dc:identifier>https://gallica.bnf.fr/ark:/12148/{issue.name}</dc:identifier>"
                f"<dc:title>{escape(issue.title)}</dc:title><dc:date>{issue.issued}</dc:date>"
                f"<dc:type>fascicule</dc:type><dc:language>fre</dc:language>"
                f"<dc:relation>Notice du catalogue : http://catalogue.bnf.fr/ark:/12148/{issue.title_name}</dc:relation>"
                f"<dc:rights>domaine public</dc:rights><dc:rights>public domain</dc:rights>"
                f"</oai_dc:dc></metadata></record></notice><provenance>bnf.fr</provenance>"
                f"<typedoc>fascicule</typedoc><title>{escape(issue.title)}</title></results>").encode()

    def _pagination(self, issue: FakeIssue) -> bytes:
        pages = "".join(
            f"<page><numero>{escape(label)}</numero><ordre>{n}</ordre><pagination_type>A</pagination_type>"
            f"<image_width>{issue.page_size(n)[0]}</image_width><image_height>{issue.page_size(n)[1]}</image_height></page>"
            for n, label in enumerate(issue.labels, 1))
        return (f'<?xml version="1.0" encoding="UTF-8"?><livre><structure><firstDisplayedPage>1</firstDisplayedPage>'
                f"<hasToc>{'true' if issue.toc else 'false'}</hasToc><hasContent>true</hasContent>"
                f"<nbVueImages>{len(issue.alto)}</nbVueImages></structure><pages>{pages}</pages></livre>").encode()

    def _manifest(self, issue: FakeIssue) -> bytes:
        base = f"https://gallica.bnf.fr/iiif/ark:/12148/{issue.name}"
        canvases = [{
            "@id": f"{base}/canvas/f{n}", "@type": "sc:Canvas", "label": label,
            "width": int(issue.page_size(n)[0] or 0), "height": int(issue.page_size(n)[1] or 0),
            "images": [{"@type": "oa:Annotation", "motivation": "sc:painting", "on": f"{base}/canvas/f{n}",
                        "resource": {"@id": f"{base}/f{n}/full/full/0/native.jpg", "@type": "dctypes:Image",
                                     "format": "image/jpeg",
                                     "service": {"@context": "http://iiif.io/api/image/1/context.json",
                                                 "@id": f"{base}/f{n}",
                                                 "profile": "http://library.stanford.edu/iiif/image-api/1.1/compliance.html#level2"}}}]}
            for n, label in enumerate(issue.labels, 1)]
        return json.dumps({"@context": "http://iiif.io/api/presentation/2/context.json",
                           "@id": f"{base}/manifest.json", "@type": "sc:Manifest", "label": issue.title,
                           "metadata": [{"label": "Date", "value": str(issue.issued)}],
                           "sequences": [{"@type": "sc:Sequence", "canvases": canvases}]}).encode()
