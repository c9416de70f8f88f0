"""Reading a /metrics scrape in tests."""

from prometheus_client.parser import text_string_to_metric_families


def parse_metrics(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted label pairs): value} of a scrape."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples: dict, name: str, **labels: str) -> float:
    """The sum of `name`'s samples that have these labels (among others)."""
    return sum(
        value
        for (sample, found), value in samples.items()
        if sample == name and all((k, v) in found for k, v in labels.items())
    )
