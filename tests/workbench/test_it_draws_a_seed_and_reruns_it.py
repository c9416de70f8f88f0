"""A run sent without a seed gets one drawn by the door: it is sent, recorded in the
generation's params and shown on the run, and Re-run sends it again."""

import re

import pytest

from completions.models import Generation
from tests.workbench.helpers import make_generation


@pytest.mark.django_db
def test_it_draws_a_seed_and_reruns_it(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    form = {"prompt": "Once", "model": "scripted", "max_tokens": "4", "n": "2", "seed": ""}
    fragment = client.post("/workbench/run/", form, headers={"HX-Request": "true"}).content.decode()
    generation = Generation.objects.get(owner=user)
    seed = generation.params["seed"]
    assert isinstance(seed, int) and 0 <= seed < 2**31
    assert re.search(rf"seed <code>{seed}</code>", fragment)

    fragment = client.post(
        f"/workbench/generations/{generation.pk}/rerun/", headers={"HX-Request": "true"}
    ).content.decode()
    again = Generation.objects.exclude(pk=generation.pk).get(owner=user)
    assert {k: v for k, v in again.params.items()} == generation.params
    assert f'id="run-{again.pk}"' in fragment and f"seed <code>{seed}</code>" in fragment

    # A seed the user typed is sent as typed.
    client.post("/workbench/run/", {**form, "seed": "7"})
    assert Generation.objects.filter(owner=user).order_by("-pk").first().params["seed"] == 7

    # Re-run is the owner's, and only for Workbench runs.
    other = make_user()
    client.force_login(other)
    assert client.post(f"/workbench/generations/{generation.pk}/rerun/").status_code == 404
    loom = make_generation(user, texts=["x"], kind="loom")
    client.force_login(user)
    assert client.post(f"/workbench/generations/{loom.pk}/rerun/").status_code == 404
