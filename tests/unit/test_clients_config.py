"""[clients] in a suite file and --client-host: what a client host needs, refused in one line."""

from __future__ import annotations

import pytest

from suites.errors import SuiteError
from suites.suite.model import parse_suite
from suites.suite.overrides import apply_overrides


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[clients]\nhosts = ["b@c1"]\n', "clients.server_address"),
        ('[clients]\nhosts = ["-oProxyCommand=x"]\nserver_address = "10.0.0.5"\n', "user@host"),
        ('[clients]\nhosts = ["a b"]\nserver_address = "10.0.0.5"\n', "user@host"),
        ('[sysbench]\nthreads = [2, 1]\n[clients]\nhosts = ["c1", "c2"]\nserver_address = "10.0.0.5"\n',
         "thread level 1 is below the 2 client hosts"),
        ('[clients]\nhosts = ["c1", "c1"]\nserver_address = "10.0.0.5"\n', "named twice"),
        ('[clients]\nhosts = ["c1"]\nserver_address = "127.0.0.1"\n', "cannot be reached"),
        ('[clients]\nhosts = ["c1"]\nserver_address = "0.0.0.0"\n', "cannot be reached"),
        ('[clients]\nhosts = ["c1"]\nserver_address = "db1"\n', "expected an IP address"),
        ('[clients]\nssh_config = "no-such-file"\n', "no such file"),
        ('[suite]\nkind = "iibench"\n[clients]\nhosts = ["c1", "c2"]\nserver_address = "10.0.0.5"\n',
         "a iibench level runs on one client host"),
    ],
)  # fmt: skip
def test_bad_clients_settings(text, expected, tmp_path):
    with pytest.raises(SuiteError) as e:
        parse_suite(text, str(tmp_path / "x.toml"))
    msg = str(e.value)
    assert "\n" not in msg and expected in msg and "x.toml" in msg


def test_a_client_host_suite(tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host c1\n")
    s = parse_suite(
        f'[clients]\nhosts = ["bench@c1"]\nserver_address = "10.0.0.5"\nssh_config = "{cfg.name}"\n',
        str(tmp_path / "x.toml"),
    )
    assert s.clients.hosts == ["bench@c1"] and s.clients.ssh_config == str(cfg)


def test_client_host_option_needs_the_address_too(tmp_path):
    s = parse_suite("", str(tmp_path / "x.toml"))
    with pytest.raises(SuiteError, match="server_address"):
        apply_overrides(s, client_host="bench@c1")
    s = parse_suite('[clients]\nserver_address = "10.0.0.5"\n', str(tmp_path / "x.toml"))
    assert apply_overrides(s, client_host="bench@c1").clients.hosts == ["bench@c1"]
