"""Parsers as untrusted code: a file that crashes or exhausts its parser is quarantined with the
reason, in a child process that really crashes (tests/hostile/crashers.py) or a real parser that
really runs out of memory; the batch goes on and the child is replaced."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from flows.release import release
from schemas.settings import MabillonSettings, SandboxSettings
from tasks.ingest import sandbox
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.sandbox import parse_untrusted
from tasks.store.layout import StoreLayout
from tasks.store.manifests import read_manifest
from tests.conftest import settings_for
from tests.fixtures.make_samples import revision_for
from tests.hostile.crashers import ENTRY

TEXT = "Le conseil municipal vote la réparation du lavoir. La séance est levée."


def settings(**limits) -> MabillonSettings:
    return MabillonSettings(sandbox=SandboxSettings(parser=ENTRY, **limits))


def refusal(data: bytes, **limits) -> str:
    with pytest.raises(ParseRefused) as refused:
        parse_untrusted(data, revision_for("f.txt", data, "text/plain"), settings(**limits))
    return str(refused.value)


def test_a_segfault_quarantines_the_file():
    assert refusal(b"SEGV please") == "parser crashed: SIGSEGV"


def test_a_runaway_allocation_meets_the_2_gib_limit():
    assert refusal(b"ALLOC please").startswith("over the 2 GiB memory limit (sandbox.max_memory_bytes)")


@pytest.mark.slow
@pytest.mark.parametrize("data, limits, reason", [
    (b"ABRT please", {}, "parser crashed: SIGABRT"),
    (b"SPIN please", {"max_cpu_s": 1}, "parser ran past the CPU-time limit of 1 s (sandbox.max_cpu_s)"),
    (b"HANG please", {"max_wall_s": 2}, "parser ran past the wall-time limit of 2 s (sandbox.max_wall_s)"),
    (b"FILES please", {"max_open_files": 64}, "parser opened more than 64 files (sandbox.max_open_files)"),
    (b"EXIT please", {}, "parser exited with status 3 before answering"),
], ids=["abort", "cpu", "wall", "files", "exit"])
def test_every_limit_and_death_has_its_reason(data, limits, reason):
    assert refusal(data, **limits) == reason


def big_scan(side: int = 7000) -> bytes:
    """A legitimate 49-megapixel greyscale page (under the 60 Mpx inspection limit)."""
    image = Image.new("L", (side, side), 255)
    ImageDraw.Draw(image).text((200, 200), "Registre des délibérations", fill=0)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


@pytest.mark.slow
def test_a_real_parser_running_out_of_memory_is_refused_not_fatal():
    data = big_scan()
    with pytest.raises(ParseRefused) as refused:
        parse_untrusted(data, revision_for("grand.png", data, "image/png"),
                        MabillonSettings(sandbox=SandboxSettings(max_memory_bytes=32 << 20)))
    assert str(refused.value).startswith("over the 32 MiB memory limit")


def test_after_a_crash_the_next_file_parses_in_a_fresh_child_and_good_files_share_one():
    sandbox._POOL.shutdown()
    started = sandbox._POOL.started
    good = TEXT.encode()
    s = settings()
    docs = [parse_untrusted(good, revision_for(f"{n}.txt", good, "text/plain"), s) for n in range(3)]
    assert all(d.pages[0].raw_text == TEXT for d in docs)
    assert sandbox._POOL.started == started + 1  # one child for the three
    refusal(b"SEGV again")
    again = parse_untrusted(good, revision_for("4.txt", good, "text/plain"), s)
    assert again.pages[0].raw_text == TEXT
    assert sandbox._POOL.started == started + 2


def test_disabled_the_parser_runs_in_process():
    good = TEXT.encode()
    doc = parse_untrusted(good, revision_for("a.txt", good, "text/plain"),
                          MabillonSettings(sandbox=SandboxSettings(enabled=False)))
    assert doc.pages[0].raw_text == TEXT


@pytest.mark.slow
def test_a_crashing_file_in_a_release_is_quarantined_and_the_batch_published(tmp_path: Path, home: Path):
    folder = tmp_path / "versement"
    folder.mkdir()
    (folder / "a.txt").write_text(TEXT, "utf-8")
    (folder / "crash.txt").write_bytes(b"SEGV " + TEXT.encode())
    (folder / "hoard.txt").write_bytes(b"ALLOC " + TEXT.encode())
    (folder / "z.txt").write_text("Le maire expose le budget de l'école. " * 3, "utf-8")
    s = settings_for(home, sandbox=SandboxSettings(parser=ENTRY, max_memory_bytes=512 << 20))
    result = release(paths=[str(folder)], settings=s)
    reasons = {Path(q.uri).name: q.reason for q in result.quarantined}
    assert reasons == {"crash.txt": "parser crashed: SIGSEGV",
                       "hoard.txt": reasons["hoard.txt"]}
    assert reasons["hoard.txt"].startswith("over the 512 MiB memory limit")
    assert result.published and result.counts.sources == 2
    manifest = read_manifest(StoreLayout.from_settings(s), result.generation)
    assert manifest.limits["sandbox"]["max_memory_bytes"] == 512 << 20
    assert manifest.limits["sandbox"]["parser"] == ENTRY
    assert manifest.limits["inspection"]["max_pixels"] == s.limits.max_pixels


def test_the_parser_child_does_not_inherit_dasks_malloc_trimming(monkeypatch):
    # Dask's nanny sets it in its workers; in an OCR child it cost 19 % more CPU per page
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.setenv("MABILLON_SANDBOX_PROBE", "kept")
    limits = SandboxSettings()
    worker = sandbox.Worker.start(limits)
    try:
        # one answered request first: read during the child's exec, environ can still be empty
        data = TEXT.encode()
        worker.run(limits, data, revision_for("a.txt", data, "text/plain"), MabillonSettings())
        environ = Path(f"/proc/{worker.process.pid}/environ").read_bytes().split(b"\0")
    finally:
        worker.stop()
    assert b"MABILLON_SANDBOX_PROBE=kept" in environ
    assert not any(e.startswith(b"MALLOC_TRIM_THRESHOLD_=") for e in environ)
