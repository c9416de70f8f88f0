"""The Workbench's probability charts, in-process: each sample with logprobs gets one,
its points the chips' probabilities (merged byte pieces as one), marked at the chip
where it leaves the other samples; History's saved run shows the same; a run without
logprobs gets none."""

import json
import math
import re

import pytest

from tests.workbench.helpers import make_generation
from workbench.models import Run

pytestmark = pytest.mark.django_db

LOGPROBS = {
    "tokens": [" The", " owl", " sang"],
    "token_logprobs": [-0.1, -2.0, -0.7],
    "top_logprobs": [{" The": -0.1}, {" owl": -2.0, " cat": -0.3}, {" sang": -0.7}],
}


def _specs(page: str) -> dict[str, dict]:
    found = re.findall(r'<figure class="weft-chart" id="([^"]+)".*?<script type="application/json">(.*?)</script>',
                       page, re.S)  # fmt: skip
    return {fid: json.loads(spec) for fid, spec in found}


def test_it_charts_each_samples_probabilities(client, make_user):
    user = make_user()
    generation = make_generation(user, texts=[" The owl sang", " The cat"], logprobs=LOGPROBS)
    client.force_login(user)
    page = client.get(f"/generations/{generation.pk}/result/").content.decode()
    specs = _specs(page)
    assert list(specs) == [f"chart-wb-{generation.pk}-0"]  # sample 1 has no logprobs
    spec = specs[f"chart-wb-{generation.pk}-0"]
    assert spec["x"] == [0, 1, 2] and spec["x_names"] == ["·The", "·owl", "·sang"]
    assert spec["series"][0]["values"] == [
        pytest.approx(math.exp(v), abs=1e-5) for v in LOGPROBS["token_logprobs"]
    ]
    # " The owl sang" leaves " The cat" at character 5, inside " owl" (token 1).
    assert spec["marks"] == [{"x": 1, "label": "leaves the others"}]
    assert spec["links"] == [
        {"target": f'#gen-{generation.pk}-result .sample[data-index="0"]', "attr": "i"}
    ]
    assert spec["y_range"] == [0.0, 1.0] and spec["sync"] == f"wb-{generation.pk}"
    assert "<td>0.905</td>" in page  # the text alternative: p of " The"

    run = Run.objects.save_generation(generation, title="kept")
    detail = client.get(f"/history/{run.pk}/").content.decode()
    assert f'id="gen-{run.pk}-result"' in detail
    assert (
        _specs(detail)[f"chart-wb-{run.pk}-0"]["series"][0]["values"] == spec["series"][0]["values"]
    )


def test_it_draws_nothing_without_logprobs(client, make_user):
    user = make_user()
    generation = make_generation(user, texts=[" a", " b"])
    client.force_login(user)
    page = client.get(f"/generations/{generation.pk}/result/").content.decode()
    assert "weft-chart" not in page and "prob-charts" not in page
