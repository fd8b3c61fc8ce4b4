"""`mabillon serve`'s deployments: each flow with a description that says what it does and for
whom, a parameter form fixed for people (flows/forms.py), a run name from its parameters, and
the forms re-registered whenever the generations change.

Deployment runs build their settings from the environment of the serving process
(MABILLON_HOME, MABILLON_…), so the `settings` parameter of a flow is hidden from the form.
"""
from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from prefect import Flow, serve
from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
from prefect.deployments.runner import EntrypointType, RunnerDeployment
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.utilities.callables import parameter_schema

from flows.ask import ask, ask_batch
from flows.drop_folder import scheduled_ingest
from flows.evaluate import evaluate
from flows.harvest import harvest_flow
from flows.operate import canary, delete, gc, promote, rollback
from flows.prefect_server import (DIE_WITH_PARENT, PrefectServer, api_url_for, start_server,  # noqa: F401
                                  stop_group, wait_healthy)
from flows.release import release_flow
from schemas.settings import MabillonSettings, ServeSettings

log = logging.getLogger(__name__)

# Parameters a deployment run never takes from the form: they come from the serving environment.
HIDDEN_PARAMETERS = ("settings",)
# Runs that write the routing record wait for each other (the release lock also serialises them).
# Not the runs that may pause for a person (release, scheduled-ingest with the gate on): Prefect's
# deployment concurrency slot is a lease its run's process renews every 225 s, and the server
# releases it when the run pauses, so the next renewal fails (410 Gone) and Prefect crashes the
# paused run (PrefectHQ/prefect#20251 is the same for AwaitingRetry). Their writes are serialised
# by the release slot (tasks/store/serialise.py), which a paused gate does not hold.
ONE_AT_A_TIME = ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE)


def form_of(flow: Flow):
    """The flow's parameter schema without the hidden parameters (Prefect has no public switch
    for this), keeping only the definitions still referenced."""
    schema = parameter_schema(flow)
    for name in HIDDEN_PARAMETERS:
        schema.properties.pop(name, None)
        if name in schema.required:
            schema.required.remove(name)
    schema.definitions = reachable_definitions(schema.properties, schema.definitions)
    return schema


def reachable_definitions(properties: dict, definitions: dict) -> dict:
    """The definitions still referenced from `properties`, transitively."""
    keep: dict = {}
    stack = [properties]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/definitions/"):
                name = ref.rsplit("/", 1)[1]
                if name not in keep and name in definitions:
                    keep[name] = definitions[name]
                    stack.append(definitions[name])
            stack.extend(v for k, v in node.items() if k != "$ref")
        elif isinstance(node, list):
            stack.extend(node)
    return keep


def deployment_specs(serve_settings: ServeSettings) -> list[tuple[Flow, dict]]:
    """Each served flow with its deployment options (add a deployment here)."""
    # only what is set: the form's schema has no null (flows/forms.py)
    ingest_params = {"params": {k: v for k, v in (
        ("drop_folder", serve_settings.drop_folder),  # a folder or s3:// prefix
        ("uri_list", str(serve_settings.uri_list) if serve_settings.uri_list else None)) if v}}
    return [
        (scheduled_ingest, {"cron": serve_settings.ingest_cron, "parameters": ingest_params}),
        (release_flow, {}),
        (harvest_flow, {"cron": serve_settings.harvest_cron, "parameters": {"params": {
            "request": serve_settings.harvest.model_dump(mode="json", exclude_none=True)}} if serve_settings.harvest else {}}),
        *((f, {"concurrency_limit": ONE_AT_A_TIME}) for f in (promote, rollback, canary, delete, gc)),
        (ask, {}),
        (ask_batch, {}),
        (evaluate, {}),
    ]


def forms_and_descriptions(flows: list[Flow], settings: MabillonSettings) -> dict[str, tuple]:
    """flow name → (parameter schema, description), built from the state as it is now."""
    from flows.forms import GenerationChoices, apply_forms, deployment_description

    schemas = {f.name: form_of(f) for f in flows}
    apply_forms(schemas, settings)
    gens = GenerationChoices.read(settings)
    return {name: (schema, deployment_description(name, gens) or None)
            for name, schema in schemas.items()}


def build_deployments(settings: MabillonSettings | ServeSettings) -> list[RunnerDeployment]:
    if isinstance(settings, ServeSettings):
        settings = MabillonSettings(serve=settings)
    specs = deployment_specs(settings.serve)
    forms = forms_and_descriptions([f for f, _ in specs], settings)
    out = []
    for f, kwargs in specs:
        schema, description = forms[f.name]
        # Module entrypoints load from the installed package, whatever the serving directory.
        d = f.to_deployment(name=f.name, tags=["mabillon"], description=description,
                            entrypoint_type=EntrypointType.MODULE_PATH, **kwargs)
        d._parameter_openapi_schema = schema
        d.entrypoint = entrypoint_of(f)
        out.append(d)
    return out


def entrypoint_of(f: Flow) -> str:
    """`module.name` of the module attribute that *is* the flow. Prefect derives the entrypoint
    from the function's own name, which misses a flow made as `flow(...)(fn)` under another name
    (the release flow: a module-level function so Dask workers get it by reference)."""
    module = sys.modules[f.fn.__module__]
    name = next((n for n, value in vars(module).items() if value is f), None)
    if name is None:  # a flow no module attribute holds cannot be loaded by a worker
        raise ValueError(f"flow {f.name!r} is not an attribute of its module {module.__name__}; "
                         "assign it to a module-level name to serve it")
    return f"{module.__name__}.{name}"


def state_stamp(settings: MabillonSettings) -> tuple:
    """Changes whenever what the forms show changes (routing record, manifests)."""
    from tasks.store.layout import StoreLayout

    layout = StoreLayout.from_settings(settings)
    stamps = []
    for path in (layout.routing, layout.generations):
        try:
            st = path.stat()
            stamps.append((st.st_mtime_ns, st.st_size))
        except FileNotFoundError:
            stamps.append(None)
    return tuple(stamps)


class FormRefresher:
    """Re-registers the forms and descriptions while serving, whenever the routing record or the
    manifests change: the generation choices and "now serving" stay true after a release, a
    promotion or a rollback, not only at the last start of `mabillon serve`.

    A refresh that fails (the server starting or stopping) is tried again at the next tick until
    it succeeds; its error is logged once, not at every tick."""

    def __init__(self, deployments: list[RunnerDeployment], settings: MabillonSettings,
                 every_s: float = 3.0):
        self.deployments, self.settings, self.every_s = deployments, settings, every_s
        # a RunnerDeployment keeps its flow's name, not the flow: the forms are built from these
        self.flows = {f.name: f for f, _ in deployment_specs(settings.serve)}
        self.stamp = state_stamp(settings)
        self.failure: str | None = None  # the error of the last refresh, while it fails
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="form-refresher", daemon=True)

    def __enter__(self) -> "FormRefresher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.tick()

    def tick(self) -> bool:
        """Refresh the forms if the state changed since the last refresh; True when it did."""
        stamp = state_stamp(self.settings)
        if stamp == self.stamp:
            return False
        try:
            self.refresh()
        except Exception as exc:  # the server may be starting or stopping: the next tick retries
            if self.failure is None:
                log.warning("deployment forms not refreshed (retried every %.0f s until it works): %s",
                            self.every_s, exc)
            self.failure = f"{type(exc).__name__}: {exc}"
            return False
        if self.failure is not None:
            log.info("deployment forms refreshed after an earlier failure (%s)", self.failure)
        self.stamp, self.failure = stamp, None
        return True

    def refresh(self) -> None:
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.actions import DeploymentUpdate

        served = [self.flows[d.flow_name] for d in self.deployments if d.flow_name in self.flows]
        forms = forms_and_descriptions(served, self.settings)
        with get_client(sync_client=True) as client:
            for d in self.deployments:
                if d.flow_name not in forms:
                    continue
                schema, description = forms[d.flow_name]
                found = client.read_deployment_by_name(f"{d.flow_name}/{d.name}")
                client.update_deployment(found.id, DeploymentUpdate(  # a dict, as registration sends
                    description=description, parameter_openapi_schema=schema.model_dump(exclude_unset=True)))
        log.info("deployment forms refreshed")


def serve_deployments(deployments: list[RunnerDeployment], api_url: str,
                      limit: int | None = None, settings: MabillonSettings | None = None) -> None:
    """Register the deployments with the server at `api_url` and run their flow runs here until
    interrupted. Runs inherit this process's environment, so MABILLON_HOME must name the home.
    With `settings`, the forms follow the state while serving (FormRefresher)."""
    with temporary_settings({PREFECT_API_URL: api_url}), contextlib.ExitStack() as stack:
        if settings is not None:
            stack.enter_context(FormRefresher(deployments, settings))
        log.info("serving %d deployments against %s", len(deployments), api_url)
        serve(*deployments, limit=limit, print_starting_message=False)


class WorkPoolMissing(LookupError):
    """The work pool named for the deployments does not exist on the server."""


def register_to_pool(deployments: list[RunnerDeployment], api_url: str, work_pool: str,
                     home: Path) -> list[str]:
    """Register the deployments with the server at `api_url`, to be run by the workers of
    `work_pool` (a `process` pool, deploy/stack.py), and return their names; nothing runs here.

    Runs take their settings from the worker's environment, except MABILLON_HOME, which the
    deployment carries (a job variable) so that every worker of the pool writes the same home.
    """
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with temporary_settings({PREFECT_API_URL: api_url}):
        with get_client(sync_client=True) as client:
            try:
                client.read_work_pool(work_pool)
            except ObjectNotFound:
                raise WorkPoolMissing(
                    f"work pool {work_pool!r} not found on {api_url}: start it and its workers with "
                    f"deploy/stack.py, or `prefect work-pool create {work_pool} --type process`") from None
        names = []
        for deployment in deployments:
            deployment.job_variables = {**deployment.job_variables,
                                        "env": {"MABILLON_HOME": str(home)}}
            deployment.apply(work_pool_name=work_pool)
            names.append(f"{deployment.flow_name}/{deployment.name}")
        log.info("registered %d deployments to work pool %s on %s", len(names), work_pool, api_url)
        return names


def configured_api_url() -> str | None:
    return PREFECT_API_URL.value() or None


@dataclass
class ReadingRoomServer:
    url: str
    process: subprocess.Popen

    def stop(self, timeout_s: float = 20) -> None:
        stop_group(self.process, timeout_s)


def start_reading_room(home: Path, host: str, port: int, log_path: Path, env: dict[str, str],
                       timeout_s: float = 180) -> ReadingRoomServer:
    """`mabillon reading-room` in its own process group (it dies with this process), waited for.

    A process of its own: it keeps the retriever and models warm, and its question box runs
    the `ask` flow against the same Prefect API as the deployments."""
    url = api_url_for(host, port).removesuffix("/api")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as sink:
        process = subprocess.Popen(
            [sys.executable, *(("-c", DIE_WITH_PARENT) if sys.platform == "linux" else ()),
             "-m", "flows.cli", "reading-room", "--home", str(home), "--host", host,
             "--port", str(port)],
            env={**env, "MABILLON_READING_ROOM__URL": env.get("MABILLON_READING_ROOM__URL", url)},
            stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    server = ReadingRoomServer(url=url, process=process)
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the reading room exited with code {process.returncode} before it "
                               f"answered at {url}; see {log_path}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                log.info("reading room at %s (log %s)", url, log_path)
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() >= deadline:
            server.stop()
            raise TimeoutError(f"the reading room did not answer at {url} within {timeout_s:.0f}s")
        time.sleep(0.5)
