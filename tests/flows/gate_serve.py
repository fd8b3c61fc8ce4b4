"""The `release` and `rollback` deployments of `mabillon serve`, as production builds them
(flows/serve.py: options, forms, the form refresher), served under a deployment name of their
own, for tests/flows/test_gate_waits.py. The home comes from MABILLON_HOME.

    python -m tests.flows.gate_serve API_URL DEPLOYMENT_NAME
"""
from __future__ import annotations

import logging
import sys

SERVED_FLOWS = ("release", "rollback")


def main(api_url: str, name: str) -> None:
    from flows.serve import build_deployments, serve_deployments
    from schemas.settings import MabillonSettings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = MabillonSettings()
    deployments = [d for d in build_deployments(settings) if d.flow_name in SERVED_FLOWS]
    for d in deployments:
        d.name = name
    serve_deployments(deployments, api_url, settings=settings)


if __name__ == "__main__":
    main(*sys.argv[1:])
