"""Session-wide test environment: offline models, an isolated Prefect home, shared fixtures."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

# Before anything imports prefect: each test session gets its own ephemeral Prefect database.
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="mabillon-prefect-"))
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
for key, value in {"DASK_LOGGING__DISTRIBUTED": "warning", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "GX_ANALYTICS_ENABLED": "false",
                   "TOKENIZERS_PARALLELISM": "false", "DO_NOT_TRACK": "1",
                   "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                   # compiling the query encoder costs a release ~3 s and 90 MB per home; the tests
                   # that are about it, and the shared-corpus home the query tests share, turn it on
                   "MABILLON_EMBEDDING__COMPILE_QUERY_ENCODER": "false"}.items():
    os.environ.setdefault(key, value)

from schemas.settings import PROJECT_ROOT, MabillonSettings  # noqa: E402
from tests.runners import dask_cluster, runner  # noqa: E402,F401  (fixtures)
from tests.s3 import s3_bucket, s3_endpoint  # noqa: E402,F401  (fixtures)

SHARED_CORPUS = PROJECT_ROOT.parent / "shared" / "histqa1887" / "corpus.jsonl"
SHARED_DEV = PROJECT_ROOT.parent / "shared" / "histqa1887" / "dev.jsonl"

# Our own archival-style records (written for the tests; no text taken from elsewhere).
SAMPLE_RECORDS = [
    {"doc_id": "jo-1887-03-02", "corpus": "journal_officiel", "date": "1887-03-02",
     "title": "Séance du 2 mars 1887",
     "text": "PRÉSIDENCE DE M. FLOQUET. La séance est ouverte à deux heures. M. le président donne "
             "lecture d'une lettre du ministre de l'agriculture relative aux droits sur les blés. "
             "La Chambre décide que la discussion aura lieu jeudi. M. Clémenceau demande la parole "
             "sur l'ordre du jour; il rappelle que les cultivateurs de la Brie attendent une réponse. "
             "L'incident est clos. La séance est levée à six heures."},
    {"doc_id": "gaulois-1887-03-03", "corpus": "le_gaulois", "date": "1887-03-03",
     "text": "LA CHAMBRE. Séance terne hier au Palais-Bourbon. On attendait un grand débat sur les "
             "blés; il a été renvoyé à jeudi. M. Clémenceau, toujours impatient, a voulu parler des "
             "cultivateurs de la Brie, mais la majorité ne l'a guère écouté."},
    {"doc_id": "intransigeant-1887-03-04", "corpus": "l_intransigeant", "date": "1887-03-04",
     "text": "Les ministres se dérobent encore. Le débat sur les blés, promis depuis un mois, est "
             "remis à jeudi; les paysans de la Brie paieront l'attente. Nous le disons sans détour: "
             "c'est une politique de tergiversations."},
    {"doc_id": "jo-1887-03-10", "corpus": "journal_officiel", "date": "1887-03-10",
     "text": "PRÉSIDENCE DE M. FLOQUET. Discussion du projet de loi sur les sucres. M. Méline, "
             "rapporteur, expose que la fabrication a souffert de la concurrence étrangère. "
             "Plusieurs orateurs demandent une enquête sur les raffineries du Nord. Le renvoi à la "
             "commission est ordonné."},
]


def write_records(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    return path


@pytest.fixture
def records_file(tmp_path: Path) -> Path:
    return write_records(tmp_path / "export.jsonl", SAMPLE_RECORDS)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def settings_for(home: Path, **overrides) -> MabillonSettings:
    return MabillonSettings(home=home, **overrides)


@pytest.fixture(scope="session")
def shared_corpus_home(tmp_path_factory) -> Path:
    """The whole shared 1887 corpus ingested once per session (slow tests share it)."""
    from flows.release import release

    if not SHARED_CORPUS.exists():
        pytest.skip(f"shared corpus not found at {SHARED_CORPUS}")
    home = tmp_path_factory.mktemp("shared-home")
    settings = settings_for(home)
    settings.embedding.compile_query_encoder = True  # its questions use the compiled encoder, as users' do
    release(paths=[str(SHARED_CORPUS)], settings=settings)
    return home
