"""An S3-compatible endpoint on loopback (moto's server), for the s3:// warehouse and source tests.

A real HTTP server speaking the S3 protocol, so pyarrow, LanceDB (Rust object_store) and boto3
all go over the wire exactly as they would against MinIO.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from flows.prefect_server import free_port
from schemas.settings import StorageSettings

MOTO_SERVER = Path(sys.executable).with_name("moto_server")
KEY, SECRET, REGION = "mabillon-test", "mabillon-test-secret", "us-east-1"


@dataclass(frozen=True)
class S3Bucket:
    endpoint: str
    name: str

    @property
    def storage(self) -> StorageSettings:
        return StorageSettings(endpoint_url=self.endpoint, region=REGION, access_key_id=KEY,
                               secret_access_key=SECRET)

    @property
    def env(self) -> dict[str, str]:
        """The variables a `mabillon` process (or the compose worker) is given."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION, "AWS_ACCESS_KEY_ID": KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_ALLOW_HTTP": "true"}

    def uri(self, prefix: str = "") -> str:
        return f"s3://{self.name}/{prefix}".rstrip("/")

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=KEY, aws_secret_access_key=SECRET)

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def start_s3_server(timeout_s: float = 60) -> tuple[subprocess.Popen, str]:
    """moto_server on a free loopback port, in its own process group; (process, endpoint URL)."""
    if not MOTO_SERVER.exists():
        raise RuntimeError(f"{MOTO_SERVER} missing: install the test extra (pip install -e '.[test]')")
    port = free_port()
    process = subprocess.Popen([str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(f"{endpoint}/moto-api/", timeout=2)
            return process, endpoint
        except httpx.HTTPError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.2)


def stop_s3_server(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(20)


@pytest.fixture(scope="session")
def s3_endpoint():
    process, endpoint = start_s3_server()
    yield endpoint
    stop_s3_server(process)


@pytest.fixture
def s3_bucket(s3_endpoint) -> S3Bucket:
    bucket = S3Bucket(s3_endpoint, f"mabillon-{uuid.uuid4().hex[:12]}")
    bucket.client().create_bucket(Bucket=bucket.name)
    return bucket
