from django.apps import AppConfig


class LoomConfig(AppConfig):
    name = "loom"

    def ready(self) -> None:
        from django.urls import reverse

        from completions.registry import register_result_url
        from completions.signals import generation_finished
        from loom.generation import KIND, on_generation_finished

        generation_finished.connect(on_generation_finished, dispatch_uid="loom-generation-finished")
        register_result_url(KIND, lambda g: reverse("loom:generation_result", args=[g.pk]))
