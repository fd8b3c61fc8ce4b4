"""Imported at start-up by every Python process whose PYTHONPATH names this folder: the `serve`
process of tests/flows/test_gate_waits.py and the flow runs it spawns.

Prefect renews a run's deployment concurrency lease every 0.75 × 300 s, both hard-coded in its
flow engine (`maintain_concurrency_lease(lease_id, 300)`, `_RENEWAL_FRACTION`); no setting
shortens it. With MABILLON_TEST_LEASE_RENEWAL_FRACTION the renewal comes every
300 × fraction seconds instead, so a paused run outlives many renewal periods in seconds, and a
run that holds a lease across its pause crashes within one.
"""
import os

_fraction = os.environ.get("MABILLON_TEST_LEASE_RENEWAL_FRACTION")
if _fraction:
    import prefect.concurrency._leases as _leases

    _leases._RENEWAL_FRACTION = float(_fraction)
