"""Session-wide test environment: offline models, an isolated Prefect home, shared fixtures."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

# Before anything imports prefect: each test process gets its own ephemeral Prefect database.
# Under xdist the workers inherit the controller's environment, and two servers on one SQLite
# file lock each other out, so each worker takes a home of its own.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
# A process a test starts may import this module too (Dask's worker processes do): it keeps the
# home of the test process above it, which its environment names, instead of making one that
# no pytest_unconfigure would remove (a fresh-clone run left 8 such folders).
_HOME_OF = WORKER or "main"
_OWN_PREFECT_HOME = None  # removed when the process's tests end (pytest_unconfigure)
if os.environ.get("MABILLON_TEST_PREFECT_HOME_OF") != _HOME_OF and (WORKER or "PREFECT_HOME" not in os.environ):
    _OWN_PREFECT_HOME = os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix=f"mabillon-prefect-{_HOME_OF}-")
    os.environ["MABILLON_TEST_PREFECT_HOME_OF"] = _HOME_OF
# An xdist worker's flow runs, in its own process and in the `mabillon` processes its tests start
# (`cli_prefect`), report to one Prefect server of the worker's, started before its first test
# (pytest_configure) and stopped after its last: the URL is set here, before anything imports
# Prefect, which reads it then. Otherwise Prefect starts a temporary server of its own in the
# worker, beside the session's server for the commands: two servers' start (each migrates a new
# database) and background services on the two cores, for one worker.
SESSION_SERVER_PORT = None
if WORKER and "PREFECT_API_URL" not in os.environ:
    from flows.prefect_server import free_port  # nothing of Prefect

    SESSION_SERVER_PORT = free_port()
    os.environ["PREFECT_API_URL"] = f"http://127.0.0.1:{SESSION_SERVER_PORT}/api"
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
for key, value in {"DASK_LOGGING__DISTRIBUTED": "warning", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "GX_ANALYTICS_ENABLED": "false",
                   "TOKENIZERS_PARALLELISM": "false", "DO_NOT_TRACK": "1",
                   "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                   # compiling the query encoder costs a release ~3 s and 90 MB per home; the tests
                   # that are about it, and the shared-corpus home the query tests share, turn it on
                   "MABILLON_EMBEDDING__COMPILE_QUERY_ENCODER": "false"}.items():
    os.environ.setdefault(key, value)
if WORKER:
    # Workers share the cores: torch and onnxruntime at all cores in each spin against the other
    # workers. Measured under contention (load 22-31 on 2 cores): 0.135 and 0.108 CPU-s a chunk
    # at 2 torch threads against 0.089 and 0.075 at 1; 30-38 CPU-ms a compiled query against
    # 15-18. Embedding the shared corpus's 3,763 chunks is most of its build.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("MABILLON_EMBEDDING__THREADS", str(max(1, (os.cpu_count() or 1) // workers)))

from schemas.settings import PROJECT_ROOT, MabillonSettings  # noqa: E402
from tests import warm_cli  # noqa: E402
from tests.homes import home_templates  # noqa: E402,F401  (fixture)
from tests.runners import dask_cluster, runner  # noqa: E402,F401  (fixtures)
from tests.s3 import s3_bucket, s3_endpoint  # noqa: E402,F401  (fixtures)

pytest_plugins = ["tests.cpu_report"]  # MABILLON_TEST_CPU_REPORT=<dir>: CPU seconds per test

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


_SESSION_SERVER = None  # the worker's Prefect server (SESSION_SERVER_PORT), while it runs
_SESSION_SERVER_ROOT = None  # its log and database (~40 MB), removed after it stops


def pytest_configure(config) -> None:
    global _SESSION_SERVER, _SESSION_SERVER_ROOT
    warm_cli.install()  # the commands tests start fork from one warm parent (MABILLON_TEST_COLD_CLI=1: cold)
    if SESSION_SERVER_PORT is not None and _SESSION_SERVER is None:
        from flows.prefect_server import start_server

        _SESSION_SERVER_ROOT = root = Path(tempfile.mkdtemp(prefix=f"mabillon-prefect-server-{WORKER}-"))
        _SESSION_SERVER = start_server("127.0.0.1", SESSION_SERVER_PORT, root / "server.log",
                                       prefect_home=root / "home")


def pytest_unconfigure(config) -> None:
    """Stop what pytest_configure started, and leave nothing of it in the temporary folder (a
    run left ~40 MB there for each worker, runs after runs)."""
    global _SESSION_SERVER, _SESSION_SERVER_ROOT
    warm_cli.uninstall()
    if _SESSION_SERVER is not None:
        _SESSION_SERVER.stop()
        _SESSION_SERVER = None
    for folder in (_SESSION_SERVER_ROOT, _OWN_PREFECT_HOME):
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    _SESSION_SERVER_ROOT = None


@pytest.fixture(scope="session")
def cli_prefect(tmp_path_factory):
    """One Prefect server on loopback for the `mabillon` processes the tests start: a command
    pointed at it (its `client_env()`) reports there instead of starting a temporary server of
    its own, as a command beside `mabillon serve` does. (The release slot is a file lock, never
    held on a server: a command killed mid-release leaves nothing on it that blocks another.)
    Under xdist, the worker's own server, which its in-process flow runs report to as well."""
    if _SESSION_SERVER is not None:
        yield _SESSION_SERVER
        return
    from flows.prefect_server import free_port, start_server

    root = tmp_path_factory.mktemp("cli-prefect")
    server = start_server("127.0.0.1", free_port(), root / "server.log", prefect_home=root / "home")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def shared_corpus_home(tmp_path_factory) -> Path:
    """The whole shared 1887 corpus ingested once per run (slow tests share it, read only).

    Under xdist the first worker that needs it builds it in the run's common temporary folder,
    under a file lock; another worker waits for it instead of ingesting the corpus again."""
    from filelock import FileLock

    from flows.release import release

    if not SHARED_CORPUS.exists():
        pytest.skip(f"shared corpus not found at {SHARED_CORPUS}")
    root = tmp_path_factory.getbasetemp()
    if WORKER:
        root = root.parent  # one folder above every worker's own
    home, done = root / "shared-home", root / "shared-home.built"
    with FileLock(str(root / "shared-home.lock")):
        if not done.exists():
            shutil.rmtree(home, ignore_errors=True)  # a build interrupted half-way
            settings = settings_for(home)
            settings.embedding.compile_query_encoder = True  # its questions use the compiled encoder, as users' do
            release(paths=[str(SHARED_CORPUS)], settings=settings)
            done.touch()
    return home


# Under xdist (`--dist loadgroup`) a group of tests runs on one worker. Tests whose session
# fixtures are one expensive stack (a Prefect server with `mabillon serve`, the shared corpus) are
# one group, so each stack starts once per run; any other test goes with its module, so a
# module's own fixtures are built once too.
XDIST_GROUPS = {"served": {"prefect_server", "served_home", "serving", "ask_run", "served_bucket"},
                "shared-corpus": {"shared_corpus_home"}}


SHARED_FIXTURE_MODULES = {"tests.conftest", "tests.flows.conftest"}


def shared_fixtures_used(item) -> set[str]:
    """The fixtures (with those they use) that `item` takes from the shared conftests: a module
    fixture of the same name (tests/flows/test_ask.py has its own `served_home`) starts no stack."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return {name for name, chain in defs.items()
            if chain and getattr(chain[-1].func, "__module__", None) in SHARED_FIXTURE_MODULES}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    grouping = WORKER and getattr(config.option, "loadgroup", False)
    for item in items:
        used = shared_fixtures_used(item)
        group = next((g for g, fixtures in XDIST_GROUPS.items() if fixtures & used), None)
        if group is None:  # a module's own xdist_group (the Dask modules share one cluster), or the module
            declared = item.get_closest_marker("xdist_group")
            group = declared.args[0] if declared else item.module.__name__
        item.add_marker(pytest.mark.xdist_group(group))
        if grouping and hasattr(item, "_id"):
            # xdist 3.8 groups by a nodeid suffix that it writes to `_nodeid`; pytest 9.2 reads a
            # node's id from `_id`, so without this every test would go to any worker
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(f"{item.nodeid}@{group}")
    if grouping:
        items[:] = longest_groups_first(items)


def group_of(item) -> str:
    return next(m.args[0] for m in item.iter_markers("xdist_group"))


# Session fixtures whose processes one group alone uses, finished when that group's last test on
# its worker ends rather than at the end of the session, where they would idle beside the rest of
# the suite: the served stack (a Prefect server, at 1.7 CPU-s a minute idle; `mabillon serve`,
# whose runner polls it every second; its reading room) and the session's Dask cluster (two
# worker processes). Finishing a fixture finishes those built on it first (pytest's own order);
# a later test that asks for one again gets a new one.
GROUP_STACKS = {"served": ("prefect_server", "served_bucket"), "dask": ("dask_cluster",)}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    if not (WORKER and getattr(item.config.option, "loadgroup", False)):
        return  # groups are contiguous only on xdist's loadgroup workers
    group = group_of(item)
    if group not in GROUP_STACKS or (nextitem is not None and group_of(nextitem) == group):
        return
    # pytest has no public call for this: FixtureDef.finish is what it runs at a scope's end
    # (pytest 9.2; it reads only `request.node`)
    manager = item.session._fixturemanager
    for name in GROUP_STACKS[group]:
        for fixturedef in manager.getfixturedefs(name, item) or ():
            fixturedef.finish(item._request)  # a no-op for one never set up


def longest_groups_first(items: list) -> list:
    """The order in which the workers take the groups (the Makefile turns xdist's own reordering,
    by number of tests, off): a long group taken last runs alone while the other cores idle, and
    the shared corpus is one test of minutes. So the shared corpus first, then the groups by their
    slow tests (each a CLI process, a cluster or a browser), then by size."""
    slow, size = defaultdict(int), defaultdict(int)
    for item in items:
        size[group_of(item)] += 1
        slow[group_of(item)] += item.get_closest_marker("slow") is not None
    rank = {g: (g != "shared-corpus", -slow[g], -size[g]) for g in size}
    return sorted(items, key=lambda item: rank[group_of(item)])  # stable: a group keeps its order
