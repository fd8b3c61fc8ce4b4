"""French text cues for the LLM-free `rules` policy: corpus cues, named entities in their
surface form, dates, and OCR-tolerant matching of an entity in a chunk.

Matching folds case and accents and ignores the spaces and hyphens OCR puts inside words
("Flo- quet", "obsè ques"), so "M. Floquet" matches either way.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from datetime import date, timedelta

PRESS = ("le_gaulois", "l_intransigeant")
CHAMBER = "journal_officiel"

# Surface forms naming each sub-corpus, folded.
_PAPER_CUES = {
    "le_gaulois": re.compile(r"\bgaulois\b"),
    "l_intransigeant": re.compile(r"\bintransigeant\b"),
}
_PAPER_NAMES = re.compile(r"\b(?:l['’]\s*)?intransigeant\b|\b(?:le\s+)?gaulois\b", re.IGNORECASE)
_CHAMBER_CUE = re.compile(
    r"\b(chambre|deputes?|seance|debats?|tribune|journal officiel|amendement|orateurs?|"
    r"interpellation|ministre|commission|rapporteur|vote|scrutin|discussion|projet de loi)\b")
_PRESS_CUE = re.compile(r"\b(presse|journal|journaux|quotidiens?|article|chronique|rapporte)\b")

_MONTHS = {m: i for i, m in enumerate(
    "janvier fevrier mars avril mai juin juillet aout septembre octobre novembre decembre".split(),
    start=1)}
_ISO = re.compile(r"\b(1[789]\d\d)-(\d\d)-(\d\d)\b")
_FRENCH_DATE = re.compile(r"\b(\d{1,2})(?:er)?\s+(" + "|".join(_MONTHS) + r")\s+(1[789]\d\d)\b")

# Capitalised words that start questions or name institutions, not entities to look for.
_NOT_ENTITIES = {
    "en", "quel", "quelle", "quels", "quelles", "comment", "pourquoi", "lequel", "laquelle",
    "lesquels", "qui", "que", "quoi", "dans", "selon", "entre", "la", "le", "les", "l", "de", "du",
    "des", "au", "aux", "a", "chambre", "senat", "presse", "gaulois", "intransigeant",
    "journal", "officiel", "deputes", "depute", "monsieur", "messieurs", "mm", "m", "et", "ou",
    "sur", "par", "pour", "avec", "un", "une", "ce", "cette", "ces", "il", "elle", "ils", "elles",
    "quelle", "est", "sont", "ont", "france", "gouvernement", "republique", "etat",
}
_PARTICLES = {"de", "des", "du", "d'", "la", "le", "l'"}
_TOKEN = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿ][A-Za-zÀ-ÖØ-öø-ÿ'’\-]*")


def fold(text: str) -> str:
    """Lower case, no accents, typographic apostrophes straightened."""
    nfkd = unicodedata.normalize("NFKD", text.replace("’", "'"))
    return "".join(c for c in nfkd if not unicodedata.combining(c)).lower()


@functools.lru_cache(maxsize=4096)  # the same chunk is scored by review, held review, briefing
def squash(text: str) -> str:
    """Folded letters only: OCR splits words with spaces and hyphens, this undoes it."""
    return re.sub(r"[^a-z]", "", fold(text))


def iso(d: date) -> str:
    return d.isoformat()


def parse_iso(s: str | None) -> date | None:
    if not s:
        return None
    try:
        return date.fromisoformat(s[:10])
    except ValueError:
        return None


def shift(s: str, days: int) -> str:
    d = parse_iso(s)
    return iso(d + timedelta(days=days)) if d else s


def date_affinity(corpus_a: str | None, date_a: str | None, corpus_b: str | None,
                  date_b: str | None) -> int:
    """How well two documents' dates fit one event: 2 strong, 1 weak, 0 none. A newspaper
    reports a sitting one or two days after it; the two papers report it a day apart."""
    a, b = parse_iso(date_a), parse_iso(date_b)
    if a is None or b is None or corpus_a == corpus_b:
        return 0
    if CHAMBER in (corpus_a, corpus_b):
        lag = (b - a).days if corpus_a == CHAMBER else (a - b).days  # press minus sitting
        return 2 if lag in (1, 2) else 1 if lag == 3 else 0
    gap = abs((a - b).days)
    return 2 if gap == 1 else 1 if gap in (0, 2) else 0


def dates_in(text: str) -> list[str]:
    found = [f"{y}-{m}-{d}" for y, m, d in _ISO.findall(text)]
    for d, month, y in _FRENCH_DATE.findall(fold(text)):
        found.append(f"{y}-{_MONTHS[month]:02d}-{int(d):02d}")
    return list(dict.fromkeys(found))


def named_papers(text: str) -> list[str]:
    folded = fold(text)
    return [corpus for corpus, cue in _PAPER_CUES.items() if cue.search(folded)]


def chamber_cue(text: str) -> bool:
    return bool(_CHAMBER_CUE.search(fold(text)))


def press_cue(text: str) -> bool:
    return bool(_PRESS_CUE.search(fold(text)))


def strip_papers(text: str) -> str:
    """The question without newspaper names, so a per-paper query is about the event."""
    return re.sub(r"\s{2,}", " ", _PAPER_NAMES.sub(" ", text)).strip()


def _stop(token: str) -> bool:
    return fold(token).split("'")[-1] in _NOT_ENTITIES


def entities(text: str) -> list[str]:
    """Named entities in their surface form: runs of capitalised words ("M. Pierre Blanc",
    "Compagnie des Messageries Maritimes"), particles allowed inside a run."""
    tokens = [(m.group(0), m.start()) for m in _TOKEN.finditer(text)]
    out: list[str] = []
    run: list[str] = []

    def close() -> None:
        while run and fold(run[-1]) in _PARTICLES:
            run.pop()
        if run and not all(_stop(w) or fold(w) in _PARTICLES for w in run):
            out.append(" ".join(run))
        run.clear()

    for i, (tok, pos) in enumerate(tokens):
        sentence_start = i == 0 or text[:pos].rstrip()[-1:] in ".?!:"
        honorific = tok in ("M", "MM") and text[pos + len(tok):pos + len(tok) + 1] == "."
        capital = tok[0].isupper() and not honorific
        if capital and (_stop(tok) or (sentence_start and not run and fold(tok) in _PARTICLES)):
            capital = False
        if capital:
            run.append(tok.rstrip("'’"))
        elif run and fold(tok) in _PARTICLES:
            run.append(tok)
        else:
            close()
    close()
    return list(dict.fromkeys(e for e in out if len(squash(e)) >= 3))


def entity_keys(entity: str) -> tuple[str, str | None]:
    """(full form, distinctive last word) as squashed strings; the last word alone counts as a
    partial match when it is long enough not to hide inside common words."""
    words = [squash(w) for w in re.split(r"[\s\-]+", entity) if squash(w)]
    full = "".join(words)
    last = words[-1] if words else None
    return full, (last if last and len(last) >= 5 and last != full else None)


def match_entity(entity: str, squashed_text: str) -> float:
    """1 for the full surface form, 0.5 for its distinctive last word, 0 otherwise."""
    full, last = entity_keys(entity)
    if full and full in squashed_text:
        return 1.0
    if last and last in squashed_text:
        return 0.5
    return 0.0


_SURNAME = re.compile(r"\bM\.\s*((?:[A-ZÀ-Ö][\w'’\-]+\s?){1,3})")


def people_in(text: str, limit: int = 3) -> list[str]:
    """The most mentioned "M. Name" in a text, as written (for briefings: bridge entities)."""
    counts: dict[str, int] = {}
    for m in _SURNAME.finditer(text):
        name = m.group(1).strip(" -'’")
        key = squash(name)
        if len(key) < 4 or key in {squash(w) for w in _NOT_ENTITIES} or "president" in key:
            continue
        counts[name] = counts.get(name, 0) + 1
    return [n for n, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:limit]]
