"""Prefect on Postgres on one machine: Postgres (Debian's server, in a folder of its own, on a
loopback port), a Prefect server on it, a `process` work pool and `prefect worker` processes that
run Mabillon's deployments.

    .venv/bin/python deploy/stack.py start --state /srv/mabillon-stack --home /srv/mabillon --workers 2
    export PREFECT_API_URL=http://127.0.0.1:4200/api      # printed by start, also in STATE/env
    .venv/bin/mabillon serve --work-pool mabillon --home /srv/mabillon   # register the deployments
    .venv/bin/python deploy/stack.py status --state /srv/mabillon-stack
    .venv/bin/python deploy/stack.py stop --state /srv/mabillon-stack

`start` is idempotent: the database folder is made once (initdb) and reused, so flow run history
survives a stop and a start. Everything listens on 127.0.0.1 unless --host says otherwise. The
workers run flow runs as child processes with this environment (MABILLON_HOME from --home, and
any MABILLON_… variable given to `start`, e.g. MABILLON_RUNNER=dask). Postgres refuses to run as
root: started by root, it runs as the `postgres` user that Debian's package creates, and the state
folder must then be one that user can reach (e.g. under /srv or /tmp, not /root).

STATE holds: postgres/ (the database folder and its log), postgres.password (mode 600),
prefect-home/ (PREFECT_HOME of the server and the workers), logs/, stack.json (ports, process ids)
and env (PREFECT_API_URL=…, to `source`).
"""
from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

POOL = "mabillon"
PG_USER = "prefect"  # the database role and database the Prefect server uses
STOP_TIMEOUT_S = 30


def postgres_binary(name: str) -> str:
    """A Postgres server program (initdb, pg_ctl): on PATH, or where Debian puts it."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                      key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if versions:
        return versions[-1]
    raise SystemExit(f"{name} not found: install the Debian package postgresql "
                     f"(bash deploy/install-system-packages.sh)")


class Stack:
    def __init__(self, state: Path):
        self.state = state.resolve()
        self.pg_root = self.state / "postgres"
        self.pg_data = self.pg_root / "data"
        self.password_file = self.state / "postgres.password"
        self.prefect_home = self.state / "prefect-home"
        self.logs = self.state / "logs"
        self.record_file = self.state / "stack.json"

    # --- the record of what runs ----------------------------------------------------------
    def record(self) -> dict:
        return json.loads(self.record_file.read_text()) if self.record_file.exists() else {}

    def save(self, record: dict) -> None:
        tmp = self.record_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        tmp.replace(self.record_file)

    # --- Postgres -------------------------------------------------------------------------
    def as_postgres_owner(self, command: list[str]) -> list[str]:
        """Root runs Postgres as Debian's `postgres` user (the server refuses root)."""
        if os.geteuid() != 0:
            return command
        return ["runuser", "-u", "postgres", "--", *command]

    def prepare_postgres(self) -> str:
        """Make the database folder once; returns the password of the `prefect` role."""
        self.pg_root.mkdir(parents=True, exist_ok=True)
        if not self.password_file.exists():
            self.password_file.touch(mode=0o600)
            self.password_file.write_text(secrets.token_urlsafe(24))
        password = self.password_file.read_text().strip()
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.pg_root, owner.pw_uid, owner.pw_gid)
            probe = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-w", str(self.pg_root)])
            if probe.returncode != 0:
                raise SystemExit(f"the postgres user cannot reach {self.pg_root}: give --state a "
                                 f"folder every user can traverse (e.g. under /srv or /tmp)")
        if not (self.pg_data / "PG_VERSION").exists():
            pwfile = self.pg_root / "initdb.pw"  # readable by the server's user for initdb only
            pwfile.touch(mode=0o600)
            if os.geteuid() == 0:
                os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
            pwfile.write_text(password)
            try:
                subprocess.run(self.as_postgres_owner(
                    [postgres_binary("initdb"), "-D", str(self.pg_data), "-U", PG_USER,
                     f"--pwfile={pwfile}", "--auth=scram-sha-256", "--encoding=UTF8",
                     "--locale=C.UTF-8"]), check=True, capture_output=True, text=True)
            except subprocess.CalledProcessError as exc:
                raise SystemExit(f"initdb failed: {exc.stderr.strip()}") from None
            finally:
                pwfile.unlink(missing_ok=True)
        return password

    def start_postgres(self, host: str, port: int) -> None:
        # Loopback TCP only: no Unix socket (its path would depend on where the state lives).
        options = f"-p {port} -c listen_addresses={host} -c unix_socket_directories=''"
        done = subprocess.run(self.as_postgres_owner(
            [postgres_binary("pg_ctl"), "-D", str(self.pg_data), "-l", str(self.pg_root / "postgres.log"),
             "-o", options, "-w", "-t", "60", "start"]), capture_output=True, text=True)
        if done.returncode != 0:
            log = (self.pg_root / "postgres.log")
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise SystemExit(f"Postgres did not start on {host}:{port}: {done.stderr.strip()}\n{tail}")

    def postgres_running(self) -> bool:
        if not (self.pg_data / "PG_VERSION").exists():
            return False
        done = subprocess.run(self.as_postgres_owner(
            [postgres_binary("pg_ctl"), "-D", str(self.pg_data), "status"]), capture_output=True)
        return done.returncode == 0

    def stop_postgres(self) -> None:
        if self.postgres_running():
            subprocess.run(self.as_postgres_owner(
                [postgres_binary("pg_ctl"), "-D", str(self.pg_data), "-m", "fast", "-w", "stop"]),
                check=True, capture_output=True)

    # --- Prefect server and workers -------------------------------------------------------
    def env(self, api_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**os.environ, "PREFECT_HOME": str(self.prefect_home), "PREFECT_API_URL": api_url,
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", **(extra or {})}

    def spawn(self, name: str, command: list[str], env: dict[str, str]) -> int:
        """A process in its own group (stopped with its children), logging to logs/NAME.log."""
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as sink:
            process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True,
                                       cwd=self.state)
        return process.pid


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def stop_group(pid: int | None, timeout_s: float = STOP_TIMEOUT_S) -> None:
    if not alive(pid):
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for(check, what: str, timeout_s: float, log: Path | None = None, pid: int | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pid is not None and not alive(pid):
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            raise SystemExit(f"{what}: the process exited; its log ({log}):\n{tail}")
        try:
            if check():
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{what}: not ready within {timeout_s:.0f} s (log: {log})")


async def ensure_database(host: str, port: int, password: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(host=host, port=port, user=PG_USER, password=password,
                                       database="postgres")
    try:
        exists = await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", PG_USER)
        if not exists:
            await connection.execute(f'CREATE DATABASE "{PG_USER}"')
    finally:
        await connection.close()


def ensure_pool(api_url: str, pool: str) -> None:
    """A `process` work pool with Prefect's default job template for it."""
    response = httpx.get(f"{api_url}/work_pools/{pool}", timeout=10)
    if response.status_code == 200:
        return
    from prefect.workers.process import ProcessWorker

    created = httpx.post(f"{api_url}/work_pools/", timeout=10, json={
        "name": pool, "type": "process",
        "description": "Mabillon's deployments, run as child processes of `prefect worker`",
        "base_job_template": ProcessWorker.get_default_base_job_template()})
    created.raise_for_status()


def online_workers(api_url: str, pool: str) -> set[str]:
    rows = httpx.post(f"{api_url}/work_pools/{pool}/workers/filter", json={}, timeout=10).json()
    return {w["name"] for w in rows if w.get("status") == "ONLINE"}


def cmd_start(args: argparse.Namespace) -> int:
    stack = Stack(Path(args.state))
    stack.state.mkdir(parents=True, exist_ok=True)
    record = stack.record()
    if alive(record.get("server_pid")):
        raise SystemExit(f"a stack already runs from {stack.state} (server pid {record['server_pid']}); "
                         f"stop it first")
    password = stack.prepare_postgres()
    if not stack.postgres_running():
        stack.start_postgres(args.host, args.pg_port)
    asyncio.run(ensure_database(args.host, args.pg_port, password))
    database_url = f"postgresql+asyncpg://{PG_USER}:{password}@{args.host}:{args.pg_port}/{PG_USER}"
    api_url = f"http://{args.host}:{args.api_port}/api"
    record = {"host": args.host, "pg_port": args.pg_port, "api_url": api_url, "pool": args.pool,
              "home": str(Path(args.home).resolve()) if args.home else None,
              "database": f"postgresql+asyncpg://{PG_USER}:***@{args.host}:{args.pg_port}/{PG_USER}"}
    # The browser calls the API at this address (the UI otherwise shows an error and no data).
    server_env = stack.env(api_url, {"PREFECT_SERVER_DATABASE_CONNECTION_URL": database_url,
                                     "PREFECT_UI_API_URL": api_url})
    record["server_pid"] = stack.spawn("server", [sys.executable, "-m", "prefect", "server", "start",
                                                  "--host", args.host, "--port", str(args.api_port)],
                                       server_env)
    stack.save(record)
    wait_for(lambda: httpx.get(f"{api_url}/health", timeout=2).status_code == 200,
             "Prefect server", args.timeout, stack.logs / "server.log", record["server_pid"])
    ensure_pool(api_url, args.pool)
    # a worker's log file is its console: what it submits is written there whatever a CLI
    # command in the starting process quietened (flows/cli/quiet.py sets the console to CRITICAL)
    worker_env = stack.env(api_url, {"PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "INFO",
                                     **({"MABILLON_HOME": record["home"]} if record["home"] else {})})
    names = [f"{args.pool}-worker-{i}" for i in range(1, args.workers + 1)]
    record["worker_pids"] = {}
    for name in names:
        command = [sys.executable, "-m", "prefect", "worker", "start", "--pool", args.pool,
                   "--type", "process", "--name", name, "--install-policy", "never"]
        if args.limit:
            command += ["--limit", str(args.limit)]
        record["worker_pids"][name] = stack.spawn(name, command, worker_env)
    stack.save(record)
    for name, pid in record["worker_pids"].items():
        wait_for(lambda n=name: n in online_workers(api_url, args.pool), f"worker {name}",
                 args.timeout, stack.logs / f"{name}.log", pid)
    env_file = stack.state / "env"
    env_file.write_text(f"PREFECT_API_URL={api_url}\n")
    summary = {**record, "ui_url": api_url.removesuffix("/api"), "env_file": str(env_file),
               "logs": str(stack.logs)}
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(f"Postgres on {args.host}:{args.pg_port} ({stack.pg_data})\n"
                         f"Prefect UI: {summary['ui_url']}  (PREFECT_API_URL={api_url})\n"
                         f"work pool {args.pool}: {', '.join(names)}\n"
                         f"register the deployments: PREFECT_API_URL={api_url} "
                         f"mabillon serve --work-pool {args.pool}\n")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    stack = Stack(Path(args.state))
    record = stack.record()
    for pid in (record.get("worker_pids") or {}).values():
        stop_group(pid)
    stop_group(record.get("server_pid"))
    stack.stop_postgres()
    if record:
        record.update(server_pid=None, worker_pids={})
        stack.save(record)
    sys.stdout.write(f"stopped the stack of {stack.state}\n")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    stack = Stack(Path(args.state))
    record = stack.record()
    api_url = record.get("api_url")
    status = {"postgres": stack.postgres_running(), "server": alive(record.get("server_pid")),
              "workers": {n: alive(p) for n, p in (record.get("worker_pids") or {}).items()},
              "api_url": api_url}
    if status["server"] and api_url:
        try:
            status["online_workers"] = sorted(online_workers(api_url, record["pool"]))
        except httpx.TransportError:
            status["online_workers"] = []
    sys.stdout.write(json.dumps(status, indent=None if args.json else 2) + "\n")
    running = status["postgres"] and status["server"] and all(status["workers"].values())
    return 0 if running else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy/stack.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start Postgres, the Prefect server, the pool and its workers")
    start.add_argument("--state", required=True, help="folder of the database, logs and process ids")
    start.add_argument("--home", help="MABILLON_HOME of the flow runs the workers execute")
    start.add_argument("--workers", type=int, default=1, help="`prefect worker` processes (default 1)")
    start.add_argument("--limit", type=int, help="flow runs each worker executes at once")
    start.add_argument("--pool", default=POOL, help=f"work pool name (default {POOL})")
    start.add_argument("--host", default="127.0.0.1", help="address Postgres and the server bind")
    start.add_argument("--pg-port", type=int, default=54329, help="Postgres port (default 54329)")
    start.add_argument("--api-port", type=int, default=4200, help="Prefect server port (default 4200)")
    start.add_argument("--timeout", type=float, default=180, help="seconds to wait for each part")
    start.add_argument("--json", action="store_true")
    start.set_defaults(func=cmd_start)
    for name, func, text in (("stop", cmd_stop, "stop the workers, the server and Postgres"),
                             ("status", cmd_status, "what runs (exit 1 when a part is down)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--state", required=True)
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=func)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
