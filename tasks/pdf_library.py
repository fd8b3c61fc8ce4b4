"""pymupdf without the add-ons it imports on its own, for every module of ours that reads or
renders PDFs: `from tasks.pdf_library import pymupdf`.

pymupdf 2 imports `pymupdf.layout` and `pymupdf4llm` whenever they are installed (they come
with it), and both open onnxruntime at import (the layout model's session, pymupdf4llm's OCR
page analyser): 1.1 of the 1.3 CPU-s that `import pymupdf` costs, and onnxruntime's threads,
in every process that imports it (each ingest command, each parser-sandbox child, the reading
room). They serve `Page.get_layout()` and `to_markdown()`, which we never call.
"""
from __future__ import annotations

import os
import sys

if "pymupdf" not in sys.modules:
    # None in sys.modules makes their import raise ImportError, which pymupdf expects when they
    # are not installed; nor is it then to print its advice to install the layout add-on
    sys.modules.setdefault("pymupdf.layout", None)
    sys.modules.setdefault("pymupdf4llm", None)
    os.environ.setdefault("PYMUPDF_SUGGEST_LAYOUT_ANALYZER", "0")

import pymupdf  # noqa: E402

__all__ = ["pymupdf"]
