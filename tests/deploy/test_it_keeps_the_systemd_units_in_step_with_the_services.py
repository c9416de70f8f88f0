"""deploy/systemd's units run exactly the services launch/services.py describes —
the command `make run` starts (with the environment file's variables where `make run`
has values), the service's own environment, its stop signal and its restart policy —
so that the units and `make run` cannot drift apart. Every variable a unit names is
set in deploy/weft.env."""

import re
import signal

from launch import services
from tests.deploy.files import ENV_FILE, UNITS, environment, exec_start, unit

OWN = {"weft-prepare.service", "weft.target"}  # a unit's, not a service's


def test_it_runs_each_service_as_described():
    described = services.systemd_services()
    assert set(described) == {"weft-web@.service", "weft-worker-interactive.service",
                              "weft-worker-bulk.service", "weft-beat.service",
                              "weft-engine.service"}  # fmt: skip
    for name, service in described.items():
        entries = unit(UNITS / name)
        assert exec_start(entries["ExecStart"][0]) == list(service.command), name
        own_env = dict(e.split("=", 1) for e in entries.get("Environment", []))
        assert own_env == service.env, name
        assert entries["EnvironmentFile"] == ["/etc/weft/weft.env"], name
        assert entries["KillSignal"] == [signal.Signals(service.stop_signal).name], name
        assert service.restart is not None
        assert entries["Restart"] == ["always"], name
        assert entries["StartLimitBurst"] == [str(service.restart.burst)], name
        assert entries["StartLimitIntervalSec"] == [f"{service.restart.interval:g}"], name
        assert entries["User"] == ["weft"] and entries["WorkingDirectory"] == ["/opt/weft"]


def test_it_has_no_unit_the_services_do_not_know():
    on_disk = {path.name for path in UNITS.iterdir()}
    assert on_disk == set(services.systemd_services()) | OWN


def test_it_sets_every_variable_a_unit_names():
    defined = environment()
    for path in UNITS.iterdir():
        for name in re.findall(r"\$\{(\w+)\}", path.read_text()):
            assert name in defined, f"{path.name} uses ${{{name}}}, not set in {ENV_FILE.name}"
    # The worker queues are `${WEFT_GENERATION_QUEUE}.<pool>`: never empty in production.
    assert defined["WEFT_GENERATION_QUEUE"]


def test_it_starts_the_web_processes_nginx_sends_to():
    target = unit(UNITS / "weft.target")["Wants"][0].split()
    ports = [re.fullmatch(r"weft-web@(\d+)\.service", t)[1] for t in target if "web@" in t]
    site = (UNITS.parent / "nginx" / "weft.conf").read_text()
    assert ports and re.findall(r"server 127\.0\.0\.1:(\d+) ", site) == ports
