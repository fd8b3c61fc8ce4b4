"""LanceDB's REST namespace client loads when used, not with every table opened (issue 31)."""
from __future__ import annotations

import subprocess
import sys

from schemas.settings import PROJECT_ROOT

# A clean interpreter: the test process has long imported lancedb by the time this runs.
PROBE = """
import sys
import pyarrow as pa
from tasks.store import lance_store  # opens tables for everything else
import lancedb

api = "lance_namespace_urllib3_client.api"
print("api-before", api in sys.modules)
db = lancedb.connect(sys.argv[1])
table = db.create_table("t", pa.table({"id": [1, 2], "vector": [[0.0, 1.0], [1.0, 0.0]]}))
print("rows", table.search([1.0, 0.0]).limit(1).to_arrow()["id"].to_pylist())
import lance_namespace_urllib3_client as client
print("asked", client.TableApi.__name__, api in sys.modules)
try:
    client.NoSuchName
except AttributeError as exc:
    print("missing", exc)
"""


def test_tables_open_without_the_rest_client_which_still_loads_when_asked(tmp_path):
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "lance")], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["api-before"] == "False"  # 0.9 s of API modules not imported
    assert lines["rows"] == "[2]"  # lancedb itself works as before
    assert lines["asked"] == "TableApi True"  # the package's own __init__ ran when asked
    assert "has no attribute 'NoSuchName'" in lines["missing"]
