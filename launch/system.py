"""Debian packages `make test` needs and installs once, as root, with apt: Chromium
(the browser tests), nginx (the topology test's reverse proxy, as deploy/ sets it
up) and Node.js (the scripts' unit tests and linter). Not root, or no apt: one line
saying which command to run. The linter itself (ESLint) comes from npm, pinned in
package.json + package-lock.json, installed with `npm ci` into ./node_modules once."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from launch import LaunchError, say

CHROMIUM = Path("/usr/bin/chromium")
NGINX = Path("/usr/sbin/nginx")
ROOT = Path(__file__).resolve().parent.parent
NODE_MODULES = ROOT / "node_modules"


def apt_install(package: str, why: str) -> None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise LaunchError(
            f"{why} need Debian's {package}: run `sudo apt-get install -y {package}`, "
            "then `make test`"
        )
    say(f"installing Debian's {package} for {why} (apt-get, once)")
    noninteractive = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", package],
        check=True,
        env=noninteractive,
        stdout=subprocess.DEVNULL,
    )


def ensure_chromium() -> None:
    if not CHROMIUM.exists():
        apt_install("chromium", "the browser tests")


def ensure_nginx() -> None:
    """nginx for the topology test. The package's own service is left alone: the test
    runs its own nginx on its own ports and config (Debian starts the packaged one, on
    port 80, only where systemd runs)."""
    if not NGINX.exists():
        apt_install("nginx", "the topology test")


def ensure_node() -> None:
    if not shutil.which("node"):
        apt_install("nodejs", "the scripts' unit tests")
    if not shutil.which("npm"):
        apt_install("npm", "the scripts' linter")


def ensure_node_modules() -> None:
    """`npm ci` (the lock file's exact versions) when node_modules/ is missing or older
    than package-lock.json; otherwise nothing."""
    lock = ROOT / "package-lock.json"
    installed = NODE_MODULES / ".package-lock.json"  # npm writes it on every install
    if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return
    ensure_node()
    say("installing the scripts' linter (npm ci, once)")
    subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
