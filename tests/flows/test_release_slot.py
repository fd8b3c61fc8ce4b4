"""The release slot survives its holders, and a deletion never waits for it (issue 32).

A `mabillon ingest` SIGKILLed while it holds the slot (parsing, embedding, about to switch):
the next `delete`, `promote` and the same ingest each take the slot at once and finish, with
the generation that served before the kill serving until they change it. These commands report
to temporary Prefect servers that share the home's own Prefect database (no PREFECT_HOME, no
PREFECT_API_URL: what a user's shell gives), which is where a killed holder's slot used to
outlive it, and no `~/.prefect` is written.

A `delete` issued while a release holds the slot masks the document at once and returns; the
release, let go on afterwards, publishes and then settles the deletion: the document is in no
answer at any point, and not in what serves at the end.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.release import ReleaseOptions, release
from schemas.retrieval import Principal
from schemas.settings import PROJECT_ROOT
from tasks.query.retriever import Retriever
from tasks.store import integrity
from tasks.store.documents import document_ids
from tasks.store.layout import StoreLayout
from tasks.store.routing import read_routing
from tasks.store.serialise import read_holder
from tasks.store.tombstones import read_tombstones
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

pytestmark = pytest.mark.slow

PUBLIC = Principal(principal_id="default", tenant="default", groups=["public"])
MARKER = "Zéphyrin Quatremère-Dulac"  # only in the document deleted
SECRET = {"doc_id": "gaulois-1887-03-05", "corpus": "le_gaulois", "date": "1887-03-05",
          "text": f"Échos. On annonce que M. {MARKER}, conseiller de préfecture, quitte Alençon pour "
                  "Rouen; ses amis regrettent un homme d'esprit et un joueur de whist redoutable."}
# The ingest that is killed, then run again: enough chunks that embedding (batches of 2) is
# stopped with most of them still to do.
NEW = [{"doc_id": f"registre-{i:02d}", "corpus": "registres", "date": f"1887-04-{i + 1:02d}",
        "text": " ".join(f"Article {j}. Le conseil municipal délibère sur la voirie du hameau {i} et "
                         f"l'entretien du lavoir numéro {j}." for j in range(6))} for i in range(6)]
COMMAND_BOUND_S = 120  # the bound: each command after a kill finishes within 2 minutes


def _build(home: Path, inputs: Path) -> None:
    """g0001 serving (with SECRET), g0002 published staged: something to promote; and the home's
    own Prefect database, created as a home's first command leaves it."""
    release(paths=[str(write_records(inputs / "a.jsonl", [*SAMPLE_RECORDS[:2], SECRET]))],
            settings=settings_for(home))
    release(paths=[str(write_records(inputs / "b.jsonl", SAMPLE_RECORDS[2:3]))],
            options=ReleaseOptions(promote=False), settings=settings_for(home))
    _create_prefect_database(settings_for(home).prefect_home)


def _create_prefect_database(prefect_home: Path) -> None:
    """Start and stop a temporary server on `prefect_home`, as a command does: its database is
    created and migrated (some 11 CPU-seconds) once per run, not once per kill point. No run is
    recorded in it, and the slot is not there: it is a file lock in the home."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING")}
    env["PREFECT_HOME"] = str(prefect_home)
    subprocess.run([sys.executable, "-c", "from flows.cli.prefect_api import TemporaryServer\n"
                    "server = TemporaryServer()\nserver.wait_healthy(timeout_s=600)\nserver.stop()"],
                   cwd=PROJECT_ROOT, env=env, check=True, timeout=660)
    assert (prefect_home / "prefect.db").exists()


@pytest.fixture
def base(home_templates, home: Path):
    return settings_for(home_templates.copy("release-slot", _build, home))


def mabillon(home: Path, args: list[str], prefect: dict[str, str] | None, crash_point: str | None = None,
             user_home: Path | None = None) -> subprocess.Popen:
    """`mabillon ARGS` for `home`: reporting to `prefect` (a server's client_env), or, with None,
    as from a user's shell: no Prefect in the environment, a temporary server per command."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFECT_HOME", "PREFECT_API_URL", "PREFECT_API_AUTH_STRING", "MABILLON_TEST_CRASH_POINT")}
    env.update(MABILLON_HOME=str(home), MABILLON_EMBEDDING__BATCH_SIZE="2", **(prefect or {}))
    if user_home is not None:
        env["HOME"] = str(user_home)
    if crash_point:
        env["MABILLON_TEST_CRASH_POINT"] = crash_point
    return subprocess.Popen([sys.executable, "-m", "flows.cli", *args, "--json"], cwd=PROJECT_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def wait_for(marker: Path, proc: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"ended before {marker.name}: {proc.stderr.read().decode()[-2000:]}")
        assert time.monotonic() < deadline, f"{marker.name} never appeared"
        time.sleep(0.2)


def finished(proc: subprocess.Popen, what: str, timeout_s: float = COMMAND_BOUND_S) -> dict:
    return finished_with_log(proc, what, timeout_s)[0]


def finished_with_log(proc: subprocess.Popen, what: str, timeout_s: float = COMMAND_BOUND_S) -> tuple[dict, str]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{what} did not finish within {timeout_s:.0f} s: {err.decode()[-2000:]}") from None
    assert proc.returncode == 0, f"{what}: {err.decode()[-2000:]}"
    return json.loads(out), err.decode()


def hits(settings) -> list[str]:
    r = Retriever.open(settings, PUBLIC)
    return [h.doc_id for h in r.warm_start(MARKER, k=10)] + [h.doc_id for h in r.substring_chunks(MARKER)]


# Each kill point starts the three commands in another order, so each is the first to find the
# slot its killed holder left, once.
ORDERS = {"parse": ("delete", "promote", "ingest"), "embed": ("promote", "ingest", "delete"),
          "switch": ("ingest", "delete", "promote")}


@pytest.mark.parametrize("point", list(ORDERS))
def test_after_a_sigkill_the_next_commands_take_the_slot_at_once(point, base, tmp_path):
    home, layout = base.home, StoreLayout.from_settings(base)
    user = tmp_path / "user"  # the commands' $HOME: no Prefect state may land in it
    user.mkdir()
    routing_before = layout.routing.read_bytes()
    export = write_records(tmp_path / "new.jsonl", NEW)

    killed = mabillon(home, ["ingest", str(export)], None, crash_point=point, user_home=user)
    try:
        wait_for(layout.manifests / f".at-crash-point-{point}", killed)
        assert read_holder(layout)["pid"] == killed.pid  # it holds the slot
        os.kill(killed.pid, signal.SIGKILL)  # the command alone, as `kill -9` from a shell
        killed.wait()
        # the generation serving before is untouched, and serves on
        assert layout.routing.read_bytes() == routing_before and read_routing(layout).serving == "g0001"
        integrity._VERIFIED.clear()
        integrity.verify_generation(layout, "g0001")

        for command in ORDERS[point]:
            if command == "delete":
                r = finished(mabillon(home, ["delete", SECRET["doc_id"], "--reason", "droit à l'oubli"], None,
                                      user_home=user), "delete")
                assert r["behind"] is None and r["published_after_s"] is not None  # it took the slot
                assert SECRET["doc_id"] not in document_ids(layout, read_routing(layout).serving)
            elif command == "promote":
                r, log = finished_with_log(mabillon(home, ["promote", "g0002", "--reason", "after the crash", "-v"],
                                                    None, user_home=user), "promote")
                assert r["serving"] == read_routing(layout).serving == "g0002"
                # the home's temporary server, as for the other commands; not Prefect's own in the
                # command's process (2 s of server imports there, 5 s waited at its stop)
                assert "flow runs report to a temporary Prefect server" in log, log[-2000:]
            else:
                r = finished(mabillon(home, ["ingest", str(export)], None, user_home=user), "the same ingest")
                assert r["serving"] and read_routing(layout).serving == r["generation"]
                assert {d["doc_id"] for d in NEW} <= set(document_ids(layout, r["generation"]))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(killed.pid, signal.SIGKILL)  # anything the killed command left behind

    assert SECRET["doc_id"] not in hits(base)
    # one Prefect database, the home's own, holds every run of these commands; ~/.prefect none
    with sqlite3.connect(home / ".prefect" / "prefect.db") as db:
        flows = {name for (name,) in db.execute(
            "select distinct flow.name from flow_run join flow on flow_run.flow_id = flow.id")}
    assert flows == {"release", "delete", "promote"}
    assert not (user / ".prefect").exists()


def test_a_delete_while_a_release_holds_the_slot_masks_at_once_and_stays_deleted(base, cli_prefect, tmp_path):
    home, layout = base.home, StoreLayout.from_settings(base)
    assert SECRET["doc_id"] in hits(base)
    # the release stops just before its switch: it has staged, validated and reconciled a
    # generation that still holds SECRET, and holds the slot
    ingest = mabillon(home, ["ingest", str(write_records(tmp_path / "new.jsonl", NEW))],
                      cli_prefect.client_env(), crash_point="switch")
    try:
        wait_for(layout.manifests / ".at-crash-point-switch", ingest)
        r = finished(mabillon(home, ["delete", SECRET["doc_id"], "--reason", "droit à l'oubli"],
                              cli_prefect.client_env()), "delete during a release")
        assert ingest.poll() is None  # the release still holds the slot: the delete did not wait
        assert f"pid {ingest.pid}" in r["behind"] and r["published_after_s"] is None
        assert r["masked_after_s"] < 5
        assert SECRET["doc_id"] not in hits(base)  # masked in answers while g0001 still serves
        assert read_routing(layout).serving == "g0001"
        assert [t.doc_id for t in read_tombstones(layout).pending] == [SECRET["doc_id"]]

        (layout.manifests / ".go-on-switch").touch()  # the release goes on and publishes
        result = finished(ingest, "the release", timeout_s=600)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(ingest.pid, signal.SIGKILL)
    assert result["serving"]
    # it published the generation it had staged, then, letting the slot go, settled the
    # deletion: what serves holds the new documents and not the deleted one
    serving = read_routing(layout).serving
    assert serving != result["generation"] and read_routing(layout).history[-1].reason.startswith("delete")
    assert {d["doc_id"] for d in NEW} <= set(document_ids(layout, serving))
    assert SECRET["doc_id"] not in document_ids(layout, serving)
    assert not read_tombstones(layout).pending
    assert SECRET["doc_id"] not in hits(base)
