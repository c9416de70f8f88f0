"""Reading deploy/'s files as the programs that read them do: the environment file
(systemd's EnvironmentFile, one KEY=VALUE a line), systemd units, nginx's sizes."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

DEPLOY = Path(__file__).resolve().parent.parent.parent / "deploy"
ENV_FILE = DEPLOY / "weft.env"
NGINX_SITE = DEPLOY / "nginx" / "weft.conf"
UNITS = DEPLOY / "systemd"


def environment(path: Path = ENV_FILE) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value
    return values


def unit(path: Path) -> dict[str, list[str]]:
    """Every `Key=value` of a unit file, by key (a key may repeat: Environment=)."""
    entries: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            entries.setdefault(key, []).append(value)
    return entries


def exec_start(value: str) -> list[str]:
    """ExecStart's argv as systemd hands it over (before ${VAR} expansion): `%%` is one
    `%`; `%i` (the instance) stays for the caller to compare."""
    return [word.replace("%%", "%") for word in shlex.split(value)]


def body_limits(path: Path = NGINX_SITE) -> dict[str, int]:
    """client_max_body_size by the location it is set in ("server" for the default)."""
    limits: dict[str, int] = {}
    where = "server"
    for line in path.read_text().splitlines():
        location = re.match(r"\s*location\s+(?:=\s*)?(\S+)\s*\{", line)
        if location:
            where = location[1]
        elif re.match(r"\s*\}", line) and where != "server":
            where = "server"
        size = re.match(r"\s*client_max_body_size\s+(\d+);", line)
        if size:
            limits[where] = int(size[1])
    return limits
