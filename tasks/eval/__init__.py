"""Evaluation: metrics, the systems compared (bm25, dense, hybrid, trace), reports."""
