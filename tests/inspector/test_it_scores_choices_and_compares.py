"""Choice scoring and compare alignment, as pure functions."""

import pytest

from inspector import scoring


def _plp(ids, lps):
    return [None] + [
        {str(t): {"logprob": lp, "rank": 1, "decoded_token": f"<{t}>"}}
        for t, lp in zip(ids[1:], lps, strict=True)
    ]


def test_it_finds_where_the_continuation_starts():
    assert scoring.continuation_start([1, 2, 3], [1, 2, 3, 4, 5]) == 3
    # The candidate merged with the prefix's last token: that token is scored too.
    assert scoring.continuation_start([1, 2, 3], [1, 2, 9, 5]) == 2


def test_it_ranks_candidates_by_mean_continuation_logprob():
    prompts = [[1, 2, 3, 4], [1, 2, 5, 6, 7], [1, 2, 8]]
    plps = [
        _plp(prompts[0], [-0.1, -2.0, -2.0]),  # prefix token logprob must not count
        _plp(prompts[1], [-0.1, -1.0, -1.0, -1.0]),
        _plp(prompts[2], [-0.1, -5.0]),
    ]
    ranked = scoring.score_choices(["a", "b", "c"], [2, 2, 2], plps, prompts)
    assert [s.index for s in ranked] == [1, 0, 2]
    assert ranked[0].total_logprob == pytest.approx(-3.0)
    assert ranked[0].tokens == 3
    assert ranked[0].mean_logprob == pytest.approx(-1.0)
    assert ranked[1].total_logprob == pytest.approx(-4.0)


def _rows(pieces, lps):
    return [
        scoring.TokenRow(i, i, t, lp) for i, (t, lp) in enumerate(zip(pieces, lps, strict=True))
    ]


def test_it_aligns_two_prefixes_on_the_shared_text_only():
    a = _rows(["Once", " upon", " a", " time"], [None, -1.0, -2.0, -3.0])
    b = _rows(["Hello", ".", " a", " time"], [None, -4.0, -1.0, -1.0])
    pairs = scoring.align_from_end(a, b, max_chars=len(" a time"))
    assert [p.a.text for p in pairs] == [" a", " time"]
    assert [p.delta for p in pairs] == [pytest.approx(1.0), pytest.approx(2.0)]


def test_it_exports_csv_and_jsonl_with_extra_columns():
    import csv
    import io
    import json

    rows = scoring.rows_from_prompt_logprobs(_plp([1, 2, 3], [-1.0, -2.0]))
    stored = [{**r.as_dict(), "delta": 0.5} for r in rows]
    records = scoring.export_records(stored)
    table = list(csv.DictReader(io.StringIO(scoring.to_csv(records))))
    assert [r["id"] for r in table] == ["", "2", "3"]
    assert float(table[2]["logprob"]) == -2.0
    assert table[2]["delta"] == "0.5"
    lines = [json.loads(line) for line in scoring.to_jsonl(records).splitlines()]
    assert lines[1]["text"] == "<2>" and lines[1]["logprob"] == -1.0
