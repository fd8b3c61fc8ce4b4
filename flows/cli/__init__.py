"""The `mabillon` command line: `main.py` dispatches, one module per group of commands."""
