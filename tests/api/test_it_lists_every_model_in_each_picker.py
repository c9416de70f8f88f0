"""The Workbench, Loom and Inspect model pickers offer every routed model (two
backends at once), the default marked or preselected."""

import re

import pytest

from loom.models import Tree

pytestmark = pytest.mark.django_db


def options(html: str, name: str = "model") -> list[str]:
    select = re.search(rf'<select[^>]*name="{name}"[^>]*>(.*?)</select>', html, re.S)
    assert select, f"no <select name={name}>"
    return re.findall(r'<option value="([^"]*)"', select[1])


def test_it_offers_every_model_in_the_workbench(two_backends, client, make_user):
    client.force_login(make_user())
    html = client.get("/workbench/").content.decode()
    assert options(html) == ["smollm2-135m", "tiny"]
    assert re.search(r'<option value="smollm2-135m" selected>smollm2-135m \(default\)', html)


def test_it_offers_every_model_in_inspect(two_backends, client, make_user, settings):
    settings.WEFT_DEFAULT_MODEL = "tiny"
    client.force_login(make_user())
    html = client.get("/inspect/").content.decode()
    for picker in re.findall(r'<select[^>]*name="model(?:_b)?"[^>]*>.*?</select>', html, re.S):
        assert re.findall(r'<option value="([^"]*)"', picker) == ["smollm2-135m", "tiny"]
        assert re.search(r'<option value="tiny" selected', picker)
    assert html.count('name="model"') == 3  # score, choices and compare


def test_it_offers_every_model_in_the_loom(two_backends, client, make_user):
    user = make_user()
    tree = Tree.objects.create_from_prompt(user, "Once upon a time", settings={"model": "tiny"})
    client.force_login(user)
    html = client.get(f"/loom/{tree.pk}/", follow=True).content.decode()
    assert options(html) == ["", "smollm2-135m", "tiny"]  # "" is "default (smollm2-135m)"
    assert re.search(r'<option value="">default \(smollm2-135m\)</option>', html)
    assert re.search(r'<option value="tiny" selected>', html)
