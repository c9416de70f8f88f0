"""Templates are readable, indented markup: no line of any template in the repository
is longer than 200 characters (issue 15; the longest were over 1,000).

NOTE for the merge of issue 15's branches: on the `kit` branch alone this fails for
templates/workbench/ and templates/loom/, which other branches reformat; it passes
once they are merged. It deliberately skips no folder: a check that exempts them
could not fail for them."""

from __future__ import annotations

from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
LIMIT = 200


def test_it_keeps_every_template_line_within_200_characters():
    templates = sorted(BASE.glob("**/templates/**/*.html"))
    templates = [t for t in templates if ".venv" not in t.parts]
    assert len(templates) >= 20  # really found the project's templates
    long_lines = [
        f"{path.relative_to(BASE)}:{number} ({len(line)} characters)"
        for path in templates
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if len(line) > LIMIT
    ]
    assert long_lines == [], "\n".join(long_lines)
