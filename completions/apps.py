from django.apps import AppConfig


class CompletionsConfig(AppConfig):
    name = "completions"

    def ready(self) -> None:
        # Connects the pre_delete receiver that settles a live row's reservation.
        from completions import lifecycle  # noqa: F401
        from completions.client import backend_health
        from completions.metrics import RunsCollector
        from completions.signals import generation_finished
        from core import health, metrics

        # core imports no app: the door adds what it knows to core's checks and metrics.
        health.CHECKS["backend"] = backend_health
        metrics.register_collector(RunsCollector())
        generation_finished.connect(metrics.run_finished, dispatch_uid="weft-metrics-runs")
        from completions.streaming import publish_soon
        from core import consumers

        consumers.register_publisher(publish_soon)
