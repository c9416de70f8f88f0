"""Each sample is marked where it first leaves all the others."""

import pytest

from tests.workbench.helpers import make_generation
from workbench.display import divergence_points, sample_views


def test_it_marks_where_samples_diverge_in_text():
    assert divergence_points(["abcX", "abcY", "abZ"]) == [3, 3, 2]
    assert divergence_points(["same", "same"]) == [None, None]
    assert divergence_points(["only"]) == [None]
    assert divergence_points(["ab", "abc"]) == [None, 2]


@pytest.mark.django_db
def test_it_marks_where_samples_diverge(client, make_user):
    logprobs = {
        "tokens": [" the", " cat", " sat"],
        "token_logprobs": [-0.1, -0.2, -3.0],
        "top_logprobs": [{" the": -0.1}, {" cat": -0.2}, {" sat": -3.0, " ran": -0.3}],
        "text_offset": [0, 4, 8],
    }
    views = sample_views([{"text": " the cat sat", "logprobs": logprobs}, {"text": " the cat ran"}])
    assert [t.diverges for t in views[0].tokens] == [False, False, True]
    assert views[1].head == " the cat " and views[1].tail == "ran"

    user = make_user()
    generation = make_generation(user, texts=[" the cat sat", " the cat ran"], logprobs=logprobs)
    client.force_login(user)
    html = client.get(f"/generations/{generation.pk}/result/").content.decode()
    assert 'class="tok p2 diverge"' in html
    assert '<span class="diverge-mark"' in html and '<span class="after-diverge">ran</span>' in html
