"""Which Prefect settings a command's flow runs get from the server it reports to."""
from __future__ import annotations

from prefect.settings import get_current_settings

from flows.cli.prefect_api import PrefectLink


def heartbeat_under(link: PrefectLink) -> int | None:
    link.ready()
    try:
        return get_current_settings().flows.heartbeat_frequency
    finally:
        link.close()


def test_runs_beat_only_where_a_lasting_server_listens():
    # a server that dies with the command has no crash detection to feed; the thread cost each
    # flow run up to 1 s at its end
    assert heartbeat_under(PrefectLink("in-process", None)) is None
    assert heartbeat_under(PrefectLink("temporary", "http://127.0.0.1:9/api")) is None
    assert heartbeat_under(PrefectLink("serve", "http://127.0.0.1:9/api")) is not None
    assert get_current_settings().flows.heartbeat_frequency is not None  # restored after close
