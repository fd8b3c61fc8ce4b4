"""LanceDB's REST namespace client, imported when something uses it rather than with lancedb.

`import lancedb` imports `lance_namespace`, whose generated REST client
(`lance_namespace_urllib3_client`) imports every one of its API modules in its package
`__init__`: 0.9 s of a 1.7-s import on this machine, paid by every process that opens a table
(each CLI command, deployment run, Dask worker and query process). Mabillon opens tables on a
folder or an object store, never through a REST namespace, and lancedb itself imports only the
client's models, each by its own submodule. So the package is registered without running its
`__init__`: its submodules import as usual, and the first attribute asked of the package itself
runs the `__init__` then, as if it had run at import.
"""
from __future__ import annotations

import importlib.util
import sys
import threading

REST_CLIENT = "lance_namespace_urllib3_client"


def defer_rest_client(name: str = REST_CLIENT) -> bool:
    """Register package `name` unexecuted, before lancedb is imported; False where it is already
    imported or not installed (nothing to defer)."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    package = importlib.util.module_from_spec(spec)  # __path__ set: submodules import from it
    lock, ran = threading.RLock(), []  # re-entered: the __init__ asks attributes of itself

    def __getattr__(attribute: str):
        with lock:
            if not ran:
                ran.append(True)
                spec.loader.exec_module(package)  # the __init__, into this same module object
        if attribute in vars(package):
            return vars(package)[attribute]
        raise AttributeError(f"module {name!r} has no attribute {attribute!r}")

    package.__getattr__ = __getattr__
    sys.modules[name] = package
    return True
