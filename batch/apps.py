from django.apps import AppConfig


class BatchConfig(AppConfig):
    name = "batch"

    def ready(self) -> None:
        from batch.feeding import on_generation_finished
        from completions.signals import generation_finished

        generation_finished.connect(
            on_generation_finished, dispatch_uid="batch-generation-finished"
        )
