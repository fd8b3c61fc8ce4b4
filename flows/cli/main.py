"""`mabillon` command line: builds the settings once, dispatches to a command module.

Each command module exposes `register(subparsers, common)`; adding a command is adding a module
to COMMAND_MODULES. Only this layer prints; `--json` prints exactly one JSON document on stdout,
errors included (`{"error": ..., "code": ...}`). Every failure is one or two lines on stderr and
an exit code per kind (flows/cli/errors.py); `--debug` brings the traceback back.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from pathlib import Path

from flows.cli.errors import Exit, explain
from flows.cli.prefect_api import adopt_prefect_home
from flows.cli.quiet import configured_output, quiet_environment
from schemas.settings import MabillonSettings
from tasks.markup import CONTROL, visible

COMMAND_MODULES = [
    "flows.cli.release",
    "flows.cli.harvest",
    "flows.cli.documents",
    "flows.cli.ops",
    "flows.cli.ask",
    "flows.cli.eval",
    "flows.cli.judge",
    "flows.cli.serve",
    "flows.cli.reading_room",
]

EPILOG = """\
first steps:
  mabillon ingest docs/sample            publish a generation of the bundled sample
  mabillon documents --match conseil     find a document id
  mabillon ask "Qui présidait la séance ?"
Options --home, --json, -v and --debug go before or after the command.
`mabillon COMMAND --help` shows each command's options and an example."""


def build_settings(args: argparse.Namespace) -> MabillonSettings:
    overrides = {}
    if getattr(args, "home", None):
        overrides["home"] = Path(args.home).resolve()
    if not os.environ.get("MABILLON_ACTOR"):  # the routing history names who ran the command
        overrides["actor"] = login_name()
    return MabillonSettings(**overrides)


def login_name() -> str:
    import getpass

    try:
        return f"{getpass.getuser()} (cli)"
    except (KeyError, OSError):  # no user name for this uid (a container)
        return "local-operator"


def emit(args: argparse.Namespace, payload, human: str) -> None:
    """Print the JSON document with --json, the human text otherwise. Ids and titles come from
    delivered files: a control character among them (ESC, CSI, NUL) is printed as an escape,
    never sent raw to the terminal."""
    if getattr(args, "json", False):
        sys.stdout.write(json_text(payload, indent=2) + "\n")
    else:
        sys.stdout.write(visible(human.rstrip("\n"), keep="\n\t") + "\n")
    sys.stdout.flush()


def json_text(payload, indent: int | None = None) -> str:
    """JSON with non-ASCII text as it is, but every control character escaped (json escapes
    C0 itself; DEL, C1 such as CSI, and bidi controls it would leave raw)."""
    text = json.dumps(payload, ensure_ascii=False, indent=indent, default=str)
    return CONTROL.sub(lambda m: m.group() if m.group() == "\n" else f"\\u{ord(m.group()):04x}", text)


def add_global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """The options every command takes. On the subcommands their default is SUPPRESS, so a value
    given before the command is not reset by the subcommand's own default."""
    default = (lambda value: argparse.SUPPRESS) if suppress else (lambda value: value)
    parser.add_argument("--home", default=default(None), metavar="DIR",
                        help="state root holding warehouse/ and manifests/ "
                             "(default: $MABILLON_HOME or the project folder)")
    parser.add_argument("--json", action="store_true", default=default(False),
                        help="print one JSON document on stdout (errors too)")
    parser.add_argument("-v", "--verbose", action="store_true", default=default(False),
                        help="show what the libraries log (Prefect, models, storage)")
    parser.add_argument("--debug", action="store_true", default=default(False),
                        help="log everything and show the traceback of a failure")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the example lines of each command's epilog as written."""


class UsageError(Exception):
    def __init__(self, message: str, prog: str):
        super().__init__(message)
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing, so a usage error follows the same rules as any
    other (one line, exit code 2, the JSON document with --json)."""

    def error(self, message: str):
        raise UsageError(message, self.prog)


def add_command(sub, common, name: str, help: str, example: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand with the global options and one example in its help."""
    return sub.add_parser(name, parents=[common], help=help, description=help[:1].upper() + help[1:] + ".",
                          epilog=f"example:\n  {example}", formatter_class=HelpFormatter, **kwargs)


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        return dist_version("mabillon")
    except PackageNotFoundError:  # a checkout run without installing
        return "unknown"


def make_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mabillon", description="Mabillon: ingest archives into validated, "
                    "versioned generations; answer questions with cited source documents.",
                                     epilog=EPILOG, formatter_class=HelpFormatter)
    add_global_options(parser, suppress=False)
    parser.add_argument("--version", action="version", version=f"mabillon {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = Parser(add_help=False)
    add_global_options(common, suppress=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, common)
    return parser


def fail(args: argparse.Namespace | None, exc: BaseException) -> int:
    """One or two lines on stderr (and the JSON error document with --json); the exit code."""
    explained = explain(exc)
    if args is not None and getattr(args, "json", False):
        sys.stdout.write(json_text(explained.as_json()) + "\n")
    sys.stderr.write(visible("\n".join(explained.lines()), keep="\n\t") + "\n")
    return int(explained.code)


def usage_failure(exc: UsageError, as_json: bool) -> int:
    from flows.cli.errors import CliError

    error = CliError(exc.args[0], Exit.USAGE, f"see: {exc.prog} --help")
    return fail(argparse.Namespace(json=as_json), error)


def main(argv: list[str] | None = None) -> int:
    quiet_environment()
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = make_parser().parse_args(argv)
    except SystemExit as exc:  # --help or --version, printed by argparse
        return int(exc.code or 0)
    except UsageError as exc:
        return usage_failure(exc, as_json="--json" in argv)
    debug = args.debug or bool(os.environ.get("MABILLON_DEBUG"))
    try:
        with configured_output(verbose=args.verbose, debug=debug, progress=not args.json):
            settings = build_settings(args)
            adopt_prefect_home(settings.prefect_home)  # before anything imports Prefect
            return int(args.func(args, settings) or 0)
    except KeyboardInterrupt:
        sys.stderr.write("mabillon: interrupted\n")
        return int(Exit.INTERRUPTED)
    except Exception as exc:  # refusals and failures: a readable message, a distinct exit code
        if debug:
            raise
        return fail(args, exc)


def entry() -> None:
    """The `mabillon` executable: main(), then out of the process at once where nothing is left
    to hand over. Tearing down a query process (lance's runtime, onnxruntime, thousands of
    modules) took 0.9 s of a cold `ask`'s 4.8 s, after its answer was printed and its record
    written. A command that ran Prefect exits normally: its exit handlers send the runs' last
    logs and events and stop the temporary server."""
    code = main()
    if "prefect" in sys.modules:
        sys.exit(code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
