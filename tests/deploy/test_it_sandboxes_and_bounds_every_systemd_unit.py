"""Every systemd unit of deploy/ — weft-prepare.service too — runs sandboxed and
bounded: no new privileges, no capabilities, a read-only system, its own /tmp, only
the address families and system calls it needs, and a memory, task and descriptor
limit that fits the service; and `systemd-analyze security --offline=yes` (when the
machine has it) rates each one OK (exposure under 2)."""

import re
import shutil
import subprocess

import pytest

from tests.deploy.files import UNITS, unit

SERVICES = sorted(p.name for p in UNITS.glob("*.service"))
SAME_FOR_ALL = {
    "NoNewPrivileges": ["yes"],
    "ProtectSystem": ["strict"],
    "PrivateTmp": ["yes"],
    "ProtectHome": ["yes"],
    "CapabilityBoundingSet": [""],
    "SystemCallFilter": ["@system-service", "~@privileged"],
    "ReadWritePaths": ["/var/lib/weft"],
}
NETWORK = "AF_UNIX AF_INET AF_INET6"
# name: (address families, the least MemoryMax in MiB it needs, the most it may take)
FITS = {
    "weft-web@.service": (NETWORK, 2048, 4096),  # the body parser may take 1 GiB
    "weft-worker-interactive.service": (NETWORK, 1024, 8192),
    "weft-worker-bulk.service": (NETWORK, 1024, 8192),
    "weft-beat.service": (NETWORK, 128, 1024),
    "weft-engine.service": (NETWORK, 1024, 16384),
    "weft-prepare.service": ("AF_UNIX", 16, 256),  # a shell emptying a folder
}
UNITS_OF = {"K": 1 / 1024, "M": 1, "G": 1024}


def _mib(value: str) -> float:
    number, suffix = re.fullmatch(r"(\d+)([KMG])", value).groups()
    return int(number) * UNITS_OF[suffix]


def test_it_knows_every_unit():
    assert set(SERVICES) == set(FITS)


@pytest.mark.parametrize("name", SERVICES)
def test_it_sandboxes_and_bounds_the_unit(name):
    entries = unit(UNITS / name)
    for key, value in SAME_FOR_ALL.items():
        assert entries.get(key) == value, (name, key, entries.get(key))
    families, least, most = FITS[name]
    assert entries["RestrictAddressFamilies"] == [families], name
    assert least <= _mib(entries["MemoryMax"][0]) <= most, name
    tasks = int(entries["TasksMax"][0])
    nofile = int(entries["LimitNOFILE"][0])
    assert 8 <= tasks <= 4096 and 256 <= nofile <= 65536, name
    if name == "weft-web@.service":
        assert nofile >= 16384  # a descriptor per open stream and socket


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
@pytest.mark.parametrize("name", SERVICES)
def test_it_passes_systemd_analyze_security(name):
    answer = subprocess.run(
        # --threshold is on the 0–100 scale of the printed level × 10: fails past 2.0.
        ["systemd-analyze", "security", "--offline=yes", "--threshold=20", str(UNITS / name)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    exposure = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", answer.stdout)
    assert answer.returncode == 0 and exposure, answer.stdout[-2000:] + answer.stderr
    assert float(exposure[1]) < 2.0, answer.stdout[-2000:]
