"""`mabillon` command line: builds the settings once, dispatches to a command module.

Each command module exposes `register(subparsers, common)`; adding a command is adding a module
to COMMAND_MODULES. Only this layer prints; `--json` prints exactly one JSON document on stdout.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from schemas.settings import MabillonSettings

COMMAND_MODULES = [
    "flows.cli.release",
    "flows.cli.ops",
    "flows.cli.ask",
    "flows.cli.eval",
    "flows.cli.judge",
    "flows.cli.serve",
    "flows.cli.reading_room",
]


def build_settings(args: argparse.Namespace) -> MabillonSettings:
    overrides = {}
    if getattr(args, "home", None):
        overrides["home"] = Path(args.home).resolve()
    return MabillonSettings(**overrides)


def emit(args: argparse.Namespace, payload, human: str) -> None:
    """Print the JSON document with --json, the human text otherwise."""
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(human.rstrip("\n") + "\n")


def common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="state root holding warehouse/ and manifests/ "
                                       "(default: $MABILLON_HOME or the project root)")
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    return common


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mabillon", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = common_parser()
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, common)
    return parser


def quiet_libraries() -> None:
    # Models and analytics stay local: no hub lookups, no usage pings from this process.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def main(argv: list[str] | None = None) -> int:
    quiet_libraries()
    args = make_parser().parse_args(argv)
    settings = build_settings(args)
    try:
        return int(args.func(args, settings) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # refusals and failures: a readable message, non-zero exit
        if os.environ.get("MABILLON_DEBUG"):
            raise
        if getattr(args, "json", False):
            sys.stdout.write(json.dumps({"error": type(exc).__name__, "message": str(exc)}) + "\n")
        sys.stderr.write(f"mabillon: {type(exc).__name__}: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
