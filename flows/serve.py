"""`mabillon serve`: a Prefect server (started here, or the one PREFECT_API_URL names) and the
operator deployments, each with a typed parameter form in the UI.

Deployment runs build their settings from the environment of the serving process
(MABILLON_HOME, MABILLON_…), so the `settings` parameter of a flow is hidden from the form.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
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
from flows.operate import canary, delete, gc, promote, rollback
from flows.release import release
from schemas.settings import ServeSettings

log = logging.getLogger(__name__)

# Parameters a deployment run never takes from the form: they come from the serving environment.
HIDDEN_PARAMETERS = ("settings",)
# Runs that write the routing record wait for each other (the release lock also serialises them).
ONE_AT_A_TIME = ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE)


@dataclass
class PrefectServer:
    api_url: str
    process: subprocess.Popen | None = None  # None: a server we did not start

    @property
    def ui_url(self) -> str:
        return self.api_url.removesuffix("/api")

    def stop(self, timeout_s: float = 20) -> None:
        """Stop the server and its workers (the whole process group)."""
        stop_group(self.process, timeout_s)


def stop_group(process: subprocess.Popen | None, timeout_s: float = 20) -> None:
    """SIGTERM a child's process group, SIGKILL it if it has not gone within `timeout_s`."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout_s)


def api_url_for(host: str, port: int) -> str:
    # The browser calls the API at this address; a wildcard bind is reached via loopback.
    reachable = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{reachable}:{port}/api"


def wait_healthy(api_url: str, timeout_s: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"Prefect server exited with code {process.returncode} before it "
                               f"answered at {api_url}; see its log")
        try:
            if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"Prefect server did not answer at {api_url} within {timeout_s:.0f}s")


# Run in the child before exec'ing the server: SIGTERM when the starting process dies, even by
# SIGKILL, so no server outlives `mabillon serve` or a test session. (An exec wrapper rather than
# preexec_fn: preexec_fn forces a Python-level fork, which lancedb's fork hooks warn about.)
DIE_WITH_PARENT = ("import ctypes, os, signal, sys; "
                   "ctypes.CDLL(None).prctl(1, signal.SIGTERM); "  # 1 = PR_SET_PDEATHSIG
                   "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def start_server(host: str, port: int, log_path: Path, prefect_home: Path | None = None,
                 timeout_s: float = 120) -> PrefectServer:
    """Start `prefect server start` in its own process group and wait until it answers.

    PREFECT_UI_API_URL must name the server's own API: the UI bundle defaults to port 4200 and
    otherwise shows an error and no data.
    """
    api_url = api_url_for(host, port)
    env = {**os.environ, "PREFECT_API_URL": api_url, "PREFECT_UI_API_URL": api_url,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    if prefect_home is not None:
        env["PREFECT_HOME"] = str(prefect_home)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as sink:
        process = subprocess.Popen(
            [sys.executable, *(("-c", DIE_WITH_PARENT) if sys.platform == "linux" else ()),
             "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
            env=env, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    server = PrefectServer(api_url=api_url, process=process)
    try:
        wait_healthy(api_url, timeout_s, process)
    except BaseException:
        server.stop()
        raise
    log.info("Prefect server at %s (log %s)", server.ui_url, log_path)
    return server


def operator_form(deployment: RunnerDeployment, flow: Flow) -> RunnerDeployment:
    """Drop hidden parameters from the deployment's parameter schema, so the UI form shows only
    the typed parameter models (Prefect has no public switch for this)."""
    schema = parameter_schema(flow)
    for name in HIDDEN_PARAMETERS:
        schema.properties.pop(name, None)
        if name in schema.required:
            schema.required.remove(name)
    schema.definitions = reachable_definitions(schema.properties, schema.definitions)
    deployment._parameter_openapi_schema = schema
    return deployment


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


def build_deployments(serve_settings: ServeSettings) -> list[RunnerDeployment]:
    ingest_params = {"params": {"drop_folder": serve_settings.drop_folder,  # a folder or s3:// prefix
                                "uri_list": str(serve_settings.uri_list)
                                if serve_settings.uri_list else None}}
    specs: list[tuple[Flow, dict]] = [
        (scheduled_ingest, {"cron": serve_settings.ingest_cron, "parameters": ingest_params,
                            "concurrency_limit": ONE_AT_A_TIME}),
        *((f, {"concurrency_limit": ONE_AT_A_TIME}) for f in (release, promote, rollback, canary, delete, gc)),
        (ask, {}),
        (ask_batch, {}),
        (evaluate, {}),
    ]
    # Module entrypoints load from the installed package, whatever the serving directory.
    return [operator_form(f.to_deployment(name=f.name, tags=["mabillon"],
                                          entrypoint_type=EntrypointType.MODULE_PATH, **kwargs), f)
            for f, kwargs in specs]


def serve_deployments(deployments: list[RunnerDeployment], api_url: str,
                      limit: int | None = None) -> None:
    """Register the deployments with the server at `api_url` and run their flow runs here until
    interrupted. Runs inherit this process's environment, so MABILLON_HOME must name the home."""
    with temporary_settings({PREFECT_API_URL: api_url}):
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
