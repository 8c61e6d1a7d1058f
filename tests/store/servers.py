"""Real object-store servers on 127.0.0.1 for the result-store tests: moto's S3 server and the
gcp-storage-emulator GCS server, each started on a free port and stopped by the test."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Server:
    scheme: str  # "s3" or "gs"
    bucket: str
    env: dict[str, str]  # what a client (this process or an `mst` child) needs to reach it

    def url(self, prefix: str = "results") -> str:
        return f"{self.scheme}://{self.bucket}/{prefix}"


# Credentials and endpoints come from the backends' standard environment variables: nothing in
# mst knows it talks to a test server.
def s3_env(port: int) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


@contextmanager
def moto_s3(bucket: str = "") -> Iterator[Server]:
    from moto.server import ThreadedMotoServer

    bucket = bucket or f"mst-results-{secrets.token_hex(4)}"  # moto's state is per process: a bucket per test
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        env = s3_env(server.get_host_and_port()[1])
        with environ(env):
            import boto3

            boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket=bucket)
        yield Server("s3", bucket, env)
    finally:
        server.stop()


@contextmanager
def gcs_emulator(bucket: str = "mst-results") -> Iterator[Server]:
    from gcp_storage_emulator.server import create_server

    server = create_server("127.0.0.1", 0, in_memory=True, default_bucket=bucket)
    server.start()
    try:
        port = server._api._httpd.server_address[1]
        yield Server("gs", bucket, {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}", "FSSPEC_GS_TOKEN": "anon",
                                    "NO_GCE_CHECK": "true", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"})
    finally:
        server.stop()


@contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


