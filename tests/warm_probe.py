"""A command for tests/test_warm_cli.py: says what it was started with, then exits as asked.

    python -m tests.warm_probe <seconds to sleep> <exit code> [words…]

The words are ignored by the probe; a test gives one to look like a read-only command.
"""
from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    seconds, code = float(argv[0]), int(argv[1])
    print(json.dumps({"argv": argv, "cwd": os.getcwd(), "probe": os.environ.get("WARM_PROBE"),
                      "pid": os.getpid(), "pgid": os.getpgid(0), "torch": "torch" in sys.modules,
                      "flows": "flows" in sys.modules}), flush=True)
    print("probe: on stderr", file=sys.stderr, flush=True)
    time.sleep(seconds)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
