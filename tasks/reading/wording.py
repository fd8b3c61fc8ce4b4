"""What a reader reads, in plain French: dates, titles, where a document came from, why it was
retained and what to know about an answer — never the loop's own labels ("fused #1",
"too_few_results"), `None` or a path on the server.

The offline judges (tasks/llm/rules.py, learned.py) write their rationales as cues joined by
"; " ("P 0.69; entity Goblet; 2 channels agree; fused #1 (score 3.2)"); each cue is said here in
French. A rationale that is not made of these cues is an LLM's own words and is shown as written.
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

MONTHS = ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre",
          "octobre", "novembre", "décembre")
_DATE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")
_TIME = re.compile(r"[T ](\d{2}):(\d{2})")


def french_date(value: object) -> str:
    """'1887-03-14' → '14 mars 1887'; '1887-03' → 'mars 1887'; '1887' → '1887'; nothing (None,
    '', unreadable) → '' — a missing date is left out, never printed as `None`."""
    if value is None:
        return ""
    text = str(value).strip()
    m = _DATE.match(text)
    if not m:
        return ""
    year, month, day = m.groups()
    if not month or not 1 <= int(month) <= 12:
        return year
    if not day or not 1 <= int(day) <= 31:
        return f"{MONTHS[int(month) - 1]} {year}"
    d = int(day)
    return f"{'1er' if d == 1 else d} {MONTHS[int(month) - 1]} {year}"


def french_datetime(value: object) -> str:
    """'2026-12-06T01:26:49' → '6 décembre 2026 à 01:26' (the records keep UTC)."""
    day = french_date(value)
    m = _TIME.search(str(value or ""))
    return f"{day} à {m.group(1)}:{m.group(2)} UTC" if day and m else day


# ---- titles --------------------------------------------------------------------------------

_INCIPIT_MAX = 90


def incipit(text: str) -> str | None:
    """The first line of a text, when it reads as words (an OCR line of noise does not)."""
    for line in text[:2000].splitlines():
        line = " ".join(line.split())
        if not line:
            continue
        letters = sum(ch.isalpha() for ch in line)
        if letters < 8 or letters < 0.6 * len(line.replace(" ", "")):
            return None
        if len(line) > _INCIPIT_MAX:
            cut = line[:_INCIPIT_MAX].rsplit(" ", 1)[0]
            line = cut.rstrip(" ,;:.") + "…"
        return line
    return None


def title_from_id(doc_id: str) -> str:
    """'deliberations/saint-aubin-1887-03-14' → 'Saint-aubin, 14 mars 1887': the last part of
    the id, its file extension dropped, underscores as spaces, a trailing ISO date in words."""
    stem = PurePosixPath(doc_id.strip("/") or doc_id).name or doc_id
    stem = re.sub(r"\.[A-Za-z0-9]{1,5}$", "", stem)
    m = re.search(r"[-_ ]?(\d{4}-\d{2}-\d{2})$", stem)
    date = french_date(m.group(1)) if m else ""
    words = stem[:m.start()] if m else stem
    words = " ".join(words.replace("_", " ").split()).strip(" -")
    if words and date:
        words = f"{words}, {date}"
    words = words or date or doc_id
    return words[:1].upper() + words[1:]


def reader_title(title: str | None, doc_id: str, first_text: str = "",
                 corpus: str | None = None, date: str | None = None) -> tuple[str, bool]:
    """(title, supplied): the document's own title when it has one; else one made for it — its
    first line when that reads as words, else its corpus and date, else its id in words — and
    `supplied` says so (shown in square brackets, as archivists write a title they supply)."""
    if title and title.strip():
        return " ".join(title.split()), False
    made = incipit(first_text)
    if made:
        return made, True
    if corpus and french_date(date):
        return f"{corpus_label(corpus)}, {french_date(date)}", True
    return title_from_id(doc_id), True


_ELISION = re.compile(r"\b([ldjLDJ]|qu|Qu) (?=[aeiouyhéèêàâîôAEIOUYHÉÈÊÀÂÎÔ])")


def corpus_label(corpus: str | None) -> str:
    """'journal_officiel' → 'Journal officiel'."""
    if not corpus:
        return ""
    words = " ".join(corpus.replace("_", " ").split())
    words = _ELISION.sub(r"\1'", words)  # 'l intransigeant' → "l'intransigeant"
    return words[:1].upper() + words[1:]


# ---- where it came from ----------------------------------------------------------------------

MEDIA_TYPES = {
    "image/png": "image PNG", "image/jpeg": "image JPEG", "image/tiff": "image TIFF",
    "application/pdf": "PDF", "application/alto+xml": "page ALTO (texte d'OCR)",
    "text/html": "page HTML", "text/plain": "texte",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "document Word",
    "application/vnd.mabillon.record+json": "notice",
}


def media_label(media_type: str | None) -> str:
    return MEDIA_TYPES.get(media_type or "", media_type or "")


def source_label(uri: str | None) -> tuple[str, str | None]:
    """(what to show, a link or None) for where a document was acquired. A public address
    (http, https, an ARK) is shown and linked; anything else — a file or a bucket on the server
    — only by its file name: a reader is not shown the server's paths."""
    if not uri:
        return "", None
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "", None
    if parts.scheme in ("http", "https"):
        return uri, uri
    if uri.startswith("ark:/"):
        return uri, None
    name = PurePosixPath(unquote(parts.path or "")).name
    return name, None


# ---- why it was retained -----------------------------------------------------------------------

TOOLS = {"bm25": "les mots de la question", "dense": "le sens de la question",
         "date_range": "la date cherchée", "substring": "l'expression exacte", "warm": "la recherche"}

_CUES: list[tuple[re.Pattern, object]] = [
    (re.compile(r"^P (\d(?:\.\d+)?)$"), lambda m: f"pertinence estimée à {round(float(m[1]) * 100)} %"),
    (re.compile(r"^entity (.+)$"), lambda m: f"nomme {m[1]}"),
    (re.compile(r"^bridge (.+)$"), lambda m: f"nomme {m[1]}, relevé dans les pièces déjà retenues"),
    (re.compile(r"^date (\S+) in (\S+)\.\.(\S+)$"),
     lambda m: f"daté du {french_date(m[1]) or m[1]}, dans la période cherchée"),
    (re.compile(r"^date (\S+) next to the range asked$"),
     lambda m: f"daté du {french_date(m[1]) or m[1]}, juste à côté de la période cherchée"),
    (re.compile(r"^(\d+) channels agree$"), lambda m: "trouvé par plusieurs méthodes de recherche"),
    (re.compile(r"^fused #(\d+)$"),
     lambda m: ("en tête des résultats" if int(m[1]) <= 3 else "parmi les dix premiers résultats"
                if int(m[1]) <= 10 else "parmi les premiers résultats")),
    (re.compile(r"^(bm25|dense|date_range|substring|warm) #(\d+)$"),
     lambda m: f"parmi les premiers trouvés par {TOOLS[m[1]]}"),
    (re.compile(r"^widened date$"), lambda m: "période élargie d'un jour ou deux"),
    (re.compile(r"^nothing matched$"), lambda m: "aucun indice particulier"),
    (re.compile(r"^not reviewed$"), lambda m: "pas encore examiné"),
    (re.compile(r"^loop ended before review$"), lambda m: "la recherche s'est arrêtée avant de l'examiner"),
]
_SCORE = re.compile(r"\s*\(score -?\d+(?:\.\d+)?\)$")


def plain_cues(rationale: str) -> list[str] | None:
    """The French of an offline judge's cues; None when the rationale is not made of them."""
    text = _SCORE.sub("", rationale.strip())
    parts = [p.strip() for p in text.split("; ") if p.strip()]
    if len(parts) > 1 and parts[-1].endswith("…"):
        parts.pop()  # cut at the rationale's length limit: the cues before it stand
    out = []
    for part in parts:
        for pattern, say in _CUES:
            m = pattern.match(part)
            if m:
                out.append(say(m))
                break
        else:
            return None
    return out or None


_PROBABILITY = re.compile(r"^P (\d(?:\.\d+)?)(?:;|$)")
MAX_CUES = 3  # a line, not a paragraph


def plain_why(rationales: list[str], confirmations: int = 0) -> str:
    """One line: why this document was retained, in French — the judge's best estimate once,
    then the first few distinct cues of its rationales."""
    said: list[str] = []
    best: float | None = None
    for rationale in rationales:
        m = _PROBABILITY.match(rationale.strip())
        if m:
            best = max(best or 0.0, float(m[1]))
        cues = plain_cues(rationale)
        if cues is None:  # an LLM's own words: the first one says it
            if rationale.strip() and not said:
                said.append(rationale.strip())
            continue
        said += [c for c in cues if c not in said and not c.startswith("pertinence")]
    said = said[:MAX_CUES]
    if best is not None:
        said.insert(0, f"pertinence estimée à {round(best * 100)} %")
    if confirmations > 1:
        said.append(f"retenu par {confirmations} des recherches menées")
    line = " ; ".join(said)
    return line[:1].upper() + line[1:]


STATUS = {"accepted": "retenu", "held": "mis en attente, jamais confirmé",
          "retrieved": "trouvé, non retenu"}


def status_label(status: str) -> str:
    return STATUS.get(status, "")


# ---- what to know about an answer -------------------------------------------------------------

_DEGRADED = "Le modèle n'a pas toujours répondu : une partie du tri a été faite par des règles de secours."
NOTES = {
    "too_few_results": "Peu de documents ont été retenus : la réponse est peut-être incomplète.",
    "truncated": "Plus de documents ont été retenus que la liste n'en montre.",
    "degraded": _DEGRADED,
    "judge_fallback_rules": "Le tri a été fait par des règles simples : le juge appris n'était pas disponible.",
}


def reader_notes(flags: list[str]) -> list[str]:
    """What a reader should know about an answer, from its flags; the others (index upkeep,
    the loop's own limits) are for operators, who read them in the record and the run."""
    return list(dict.fromkeys(NOTES[f] for f in flags if f in NOTES))


PROVIDERS = {"learned": "juge appris", "rules": "règles"}


def provider_label(provider: str | None, model: str | None = None) -> str:
    name = PROVIDERS.get(provider or "", provider or "")
    return f"{name} ({model})" if model and provider not in PROVIDERS else name
