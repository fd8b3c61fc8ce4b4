"""pymupdf without the add-ons it imports on its own, for every module of ours that reads or
renders PDFs: `from tasks.pdf_library import pymupdf`.

pymupdf 2 imports `pymupdf.layout` and `pymupdf4llm` whenever they are installed (they come
with it), and both open onnxruntime at import (the layout model's session, pymupdf4llm's OCR
page analyser): 1.1 of the 1.3 CPU-s that `import pymupdf` costs, and onnxruntime's threads,
in every process that imports it (each ingest command, each parser-sandbox child, the reading
room). They serve `Page.get_layout()` and `to_markdown()`, which we never call.
"""
from __future__ import annotations

import sys

if "pymupdf" not in sys.modules:
    # None in sys.modules makes their import raise ImportError, which pymupdf expects when they
    # are not installed
    sys.modules.setdefault("pymupdf.layout", None)
    sys.modules.setdefault("pymupdf4llm", None)

import pymupdf  # noqa: E402

pymupdf.no_recommend_layout()  # nor is it to print advice to install the add-on on stdout

__all__ = ["pymupdf"]
