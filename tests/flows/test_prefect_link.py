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


def test_a_command_keeps_its_runs_in_its_own_homes_prefect_database(tmp_path, monkeypatch):
    """Precedence: PREFECT_HOME from the environment, else the home's own `.prefect`; never the
    `~/.prefect` every home would share. Applied only before Prefect is imported."""
    import os
    import sys

    from flows.cli.prefect_api import adopt_prefect_home
    from tests.conftest import settings_for

    a, b = settings_for(tmp_path / "a"), settings_for(tmp_path / "b")
    assert a.prefect_home == (tmp_path / "a" / ".prefect").resolve() != b.prefect_home
    monkeypatch.delenv("PREFECT_HOME")
    assert adopt_prefect_home(a.prefect_home) == a.prefect_home
    assert "PREFECT_HOME" not in os.environ  # Prefect is imported here: too late to change it
    monkeypatch.delitem(sys.modules, "prefect")  # as in a command that has not imported it yet
    assert adopt_prefect_home(a.prefect_home) == a.prefect_home
    assert os.environ["PREFECT_HOME"] == str(a.prefect_home)  # and every process it starts
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "explicit"))
    assert adopt_prefect_home(b.prefect_home) == tmp_path / "explicit"  # the environment's wins
