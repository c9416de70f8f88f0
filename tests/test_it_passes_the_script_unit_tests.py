"""The scripts' pure parts (static/weft: the graph's layout, the charts' series, the live
tree's merge rule) pass their unit tests, run by node's own test runner over tests/js/.
The runner's report is printed, so a failure shows which test and why."""

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_it_passes_the_script_unit_tests():
    node = shutil.which("node")
    assert node, "node is missing (make test installs Debian's nodejs)"
    result = subprocess.run(
        [node, "--test", "--test-reporter=spec", "tests/js/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    print(result.stdout, result.stderr)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # A runner that found no test file passes too: count what ran.
    ran = re.search(r"^ℹ tests (\d+)$", result.stdout, re.M)
    assert ran and int(ran[1]) > 0, "no script unit test ran"
