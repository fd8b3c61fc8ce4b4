"""File digests of a generation: what was written is what is served.

Publishing a generation records the SHA-256 of every file it is read from — its Parquet
lineage and the LanceDB data and deletion files of its table version — in
`manifests/generations/<g>.files.json`, beside the manifest (which is never rewritten; a purge
that legitimately rewrites the files records them again). Before a generation is switched to
(publish, promote, rollback) and the first time a process opens it for queries, the files are
hashed again; a file truncated or changed on disk refuses that generation with a clear error,
so the one serving before stays in service.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading

from tasks.store.atomic import atomic_write_text
from tasks.store.layout import CHUNKS_TABLE, StoreLayout
from tasks.store.lineage_store import LINEAGE_TABLES
from tasks.store.location import Location

log = logging.getLogger(__name__)


class CorruptGeneration(RuntimeError):
    """A file of the generation does not match the digest recorded when it was published."""


def _sha256(location: Location) -> str:
    digest = hashlib.sha256()
    with location.open_binary() as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def generation_files(layout: StoreLayout, generation: str) -> dict[str, Location]:
    """The files a generation is read from, by their path inside the warehouse."""
    import lance

    from tasks.store.lance_store import open_generation_table

    table = layout.lance / f"{CHUNKS_TABLE}.lance"
    version = open_generation_table(layout, generation).version
    dataset = lance.dataset(table.uri, version=version, storage_options=table.options or None)
    files: dict[str, Location] = {}
    for fragment in dataset.get_fragments():
        for data in fragment.data_files():
            files[f"lance/{CHUNKS_TABLE}.lance/data/{data.path}"] = table / "data" / data.path
        deletion = fragment.metadata.deletion_file
        if deletion is not None:
            path = deletion.path(fragment.fragment_id)
            files[f"lance/{CHUNKS_TABLE}.lance/{path}"] = table / path
    for name in LINEAGE_TABLES:
        files[f"lineage/{generation}/{name}.parquet"] = layout.lineage_dir(generation) / f"{name}.parquet"
    return files


def digests_path(layout: StoreLayout, generation: str):
    return layout.generations / f"{generation}.files.json"


def record_digests(layout: StoreLayout, generation: str) -> dict[str, str]:
    digests = {name: _sha256(loc) for name, loc in sorted(generation_files(layout, generation).items())}
    atomic_write_text(digests_path(layout, generation), json.dumps(digests, indent=1, sort_keys=True))
    _VERIFIED.discard((str(layout.manifests), generation))
    return digests


def verify_generation(layout: StoreLayout, generation: str) -> None:
    """Raise CorruptGeneration when a file differs from its recorded digest (or is missing).

    A generation published before digests were recorded has none to check: it is served as
    before, with a warning.
    """
    path = digests_path(layout, generation)
    if not path.exists():
        log.warning("generation %s has no recorded file digests; not verified", generation)
        return
    recorded: dict[str, str] = json.loads(path.read_text("utf-8"))
    try:
        present = generation_files(layout, generation)
    except Exception as exc:  # the Lance manifest itself unreadable or damaged
        raise CorruptGeneration(_refusal(generation, f"its LanceDB table cannot be read ({exc})")) from None
    missing = sorted(set(recorded) - set(present))
    if missing:
        raise CorruptGeneration(_refusal(generation, f"{missing[0]} is no longer part of it"))
    for name, location in sorted(present.items()):
        if name not in recorded:
            raise CorruptGeneration(_refusal(generation, f"{name} was not part of it when published"))
        try:
            actual = _sha256(location)
        except (FileNotFoundError, OSError) as exc:
            raise CorruptGeneration(_refusal(generation, f"{name} cannot be read ({exc})")) from None
        if actual != recorded[name]:
            raise CorruptGeneration(_refusal(
                generation, f"{name} has SHA-256 {actual[:16]}…, not the {recorded[name][:16]}… recorded "
                            "when it was published (truncated or changed on disk)"))


def verify_once(layout: StoreLayout, generation: str) -> None:
    """`verify_generation`, once per process and generation (queries reopen it often)."""
    key = (str(layout.manifests), generation)
    if key in _VERIFIED:
        return
    with _LOCK:
        if key not in _VERIFIED:
            verify_generation(layout, generation)
            _VERIFIED.add(key)


def _refusal(generation: str, what: str) -> str:
    return (f"generation {generation} is not served: {what}. Restore the file from a backup, or "
            f"serve another generation (`mabillon rollback` / `mabillon promote GEN`)")


_VERIFIED: set[tuple[str, str]] = set()
_LOCK = threading.Lock()
