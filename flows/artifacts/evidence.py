"""The evidence of one answer as a researcher reads it in Prefect's artifact pane (about 830 px
wide): per document its title, corpus and date, the cited passage with the question's words
marked, why it was kept and a link; then ranks and ids in one compact table. A second artifact
holds the lineage of the cited documents, which the links point to when no reading room runs.
"""
from __future__ import annotations

import re
import unicodedata

from schemas.query import EvidenceDocument, EvidencePackage
from schemas.settings import MabillonSettings
from tasks.query.present import route_note
from tasks.markup import md_code, md_link, md_row, md_text
from tasks.store.layout import StoreLayout

READABLE = 10  # documents shown with their passage; all of them are in the table
PASSAGE_CHARS = 420
# Words that match everywhere and mark nothing (French and English function words).
_STOPWORDS = frozenset("""
a au aux avec ce ces cet cette dans de des du en est et il ils elle elles la le les leur leurs
lui mais ne ni on ou par pas pour qu que qui quel quelle quels quelles quand comment sa se ses
son sur un une y the of and to in is was what who which when where how did does les été etait
était sont ont avait dont lors plus tout tous toute toutes fait faire cela celui celle ceux
""".split())
_WORD = re.compile(r"\w+", re.UNICODE)


def fold(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


STOPWORDS = frozenset(fold(w) for w in _STOPWORDS)


def question_terms(question: str) -> set[str]:
    terms = set()
    for word in _WORD.findall(question):
        f = fold(word)
        if word.isdigit():
            if len(word) == 4:  # a year marks; other numbers would mark everywhere
                terms.add(f)
        elif len(f) >= 3 and f not in STOPWORDS:
            terms.add(f)
    return terms


def _matches(text: str, terms: set[str]) -> list[tuple[int, int]]:
    """Spans of words whose folded form is a term, or shares a stem of 5+ letters with one."""
    stems = {t[:5] for t in terms if len(t) >= 6}
    out = []
    for m in _WORD.finditer(text):
        f = fold(m.group())
        if f in terms or (len(f) >= 6 and f[:5] in stems):
            out.append(m.span())
    return out


def marked_passage(text: str, question: str, chars: int = PASSAGE_CHARS) -> str:
    """The window of `text` where the question's words are densest, those words in bold."""
    text = " ".join(text.split())
    spans = _matches(text, question_terms(question))
    start = 0
    if len(text) > chars and spans:
        best = max(range(len(spans)), key=lambda i: sum(
            1 for s, _ in spans[i:] if s - spans[i][0] <= chars * 0.8))
        start = max(0, spans[best][0] - chars // 5)
        start = text.rfind(" ", 0, start) + 1 if start else 0
    end = min(len(text), start + chars)
    if end < len(text):
        end = max(start + chars // 2, text.rfind(" ", start, end))
    out, pos = [], start
    for s, e in spans:
        if s < start or e > end:
            continue
        out += [md_text(text[pos:s]), "**", md_text(text[s:e]), "**"]
        pos = e
    out.append(md_text(text[pos:end]))
    return ("… " if start else "") + "".join(out) + (" …" if end < len(text) else "")


STATUS = {"accepted": "accepted", "held": "held for review, not confirmed",
          "retrieved": "retrieved, not reviewed as evidence"}


def _status(d: EvidenceDocument) -> str:
    if d.status == "accepted" and d.confirmations > 1:
        return f"accepted, confirmed by {d.confirmations} sub-questions"
    return STATUS[d.status]


def _where(d: EvidenceDocument) -> str:
    e = d.evidence[0] if d.evidence else None
    where = f"p. {e.page}" if e is not None and e.page is not None else "—"
    # the OCR's own confidence on that page, as the library delivered it (ALTO word confidence)
    return where + (f" · OCR {e.ocr_confidence:.0%}" if e is not None and e.ocr_confidence is not None else "")


def evidence_markdown(package: EvidencePackage, titles: dict[str, str | None],
                      links: dict[str, tuple[str, str] | None],
                      answer_links: list[tuple[str, str]] = (), readable: int = READABLE) -> str:
    p = package
    head = [f"# {md_text(p.question)}", "",
            f"{len(p.documents)} documents from generation {md_code(p.generation)}"
            f"{md_text(route_note(p))}; {len(p.accepted)} accepted as evidence by "
            f"**{md_text(p.provider)}**{' (' + md_text(p.model) + ')' if p.model else ''}; "
            f"answered in {p.cost.total_s:.1f} s.", ""]
    if answer_links:
        head += [" · ".join(md_link(label, url) for label, url in answer_links), ""]
    if p.flags:
        head += [f"Note: {md_text(', '.join(f.replace('_', ' ') for f in p.flags))}.", ""]
    if not p.documents:
        head += ["No document visible to you matches this question."]
    body = []
    for d in p.documents[:readable]:
        title = titles.get(d.doc_id) or d.doc_id
        mark = "✓ " if d.status == "accepted" else ""
        body += [f"### {d.rank}. {mark}{md_text(title)}", "",
                 f"*{md_text(d.corpus or 'no corpus')} · {md_text(d.date or 'undated')} · {_status(d)} · "
                 f"{_where(d)}*", ""]
        if d.evidence:
            body += ["> " + marked_passage(d.evidence[0].text, p.question), ""]
        extra = []
        if d.rationales:
            extra.append(f"Why: {md_text(d.rationales[0])}")
        link = links.get(d.doc_id)
        if link:
            extra.append(md_link(*link))
        if extra:
            body += [" · ".join(extra), ""]
    table = ["## Ranks and ids", "",
             "| # | document | status | bm25 | dense | fused | page | chunk |",
             "|---|---|---|---|---|---|---|---|"]
    for d in p.documents:
        r = d.ranks
        chunk = md_code(d.evidence[0].chunk_id) if d.evidence else ""
        table.append(md_row([d.rank, md_code(d.doc_id), d.status, r.bm25 or "", r.dense or "",
                             r.fused or "", _where(d), chunk]))
    return "\n".join(head + body + table)


def lineage_markdown(package: EvidencePackage, titles: dict[str, str | None]) -> str:
    """Where each cited document comes from: revision and digest of its bytes, cited chunks with
    page, box and character offsets. (Source URIs are server paths: not shown here.)"""
    out = [f"# Lineage of the evidence for: {md_text(package.question)}", "",
           f"Generation {md_code(package.generation)}, embedding space {md_code(package.space_id)}.", ""]
    for d in package.documents:
        out += [f"### {d.rank}. {md_text(titles.get(d.doc_id) or d.doc_id)}", "",
                f"- document {md_code(d.doc_id)}, source {md_code(d.source_id or '?')}",
                f"- revision {md_code(d.revision or '?')}, sha256 {md_code(d.digest or '?')}"]
        for e in d.evidence:
            box = f", box {[round(x) for x in e.bbox]}" if e.bbox else ""
            out.append(f"- chunk {md_code(e.chunk_id)}: page {e.page if e.page is not None else '?'}{box}, "
                       f"characters {e.char_start}–{e.char_end}")
        out.append("")
    return "\n".join(out)


def document_titles(layout: StoreLayout, generation: str, doc_ids: list[str]) -> dict[str, str | None]:
    from tasks.store.lineage_store import read_lineage_table

    try:
        table = read_lineage_table(layout, generation, "revisions", ["doc_id", "title", "is_current"])
    except Exception:  # titles are a courtesy: the ids stand in
        return {}
    wanted = set(doc_ids)
    return {d: t for d, t, current in zip(table["doc_id"].to_pylist(), table["title"].to_pylist(),
                                          table["is_current"].to_pylist()) if current and d in wanted}


def publish_evidence(package: EvidencePackage, settings: MabillonSettings) -> None:
    """The lineage artifact first (the evidence links to it), then the evidence."""
    from prefect.artifacts import create_markdown_artifact

    from flows.artifacts.links import answer_links, document_link

    layout = StoreLayout.from_settings(settings)
    ids = [d.doc_id for d in package.documents]
    titles = document_titles(layout, package.generation, ids)
    lineage_id = create_markdown_artifact(
        key="ask-lineage", markdown=lineage_markdown(package, titles),
        description="where each cited document comes from")
    lineage_url = artifact_url(lineage_id)
    links = {d.doc_id: document_link(settings, package, d, lineage_url) for d in package.documents}
    markdown = evidence_markdown(package, titles, links, answer_links(settings, package))
    create_markdown_artifact(key="ask-evidence", markdown=markdown,
                             description="the documents that answer the question, with passages")


def artifact_url(artifact_id) -> str | None:
    from prefect.settings import PREFECT_UI_URL

    ui = PREFECT_UI_URL.value()
    return f"{ui.rstrip('/')}/artifacts/artifact/{artifact_id}" if ui and artifact_id else None
