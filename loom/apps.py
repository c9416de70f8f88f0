from django.apps import AppConfig


class LoomConfig(AppConfig):
    name = "loom"

    def ready(self) -> None:
        from completions.registry import register_result, register_watchers
        from completions.signals import generation_finished
        from loom import expansion
        from loom.generation import (
            KIND,
            attach_expansions_with,
            may_watch,
            on_generation_finished,
        )
        from loom.generation_views import render_result

        attach_expansions_with(expansion.attach_finished)
        generation_finished.connect(on_generation_finished, dispatch_uid="loom-generation-finished")
        register_result(KIND, render_result)
        register_watchers(KIND, may_watch)
