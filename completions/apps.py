from django.apps import AppConfig


class CompletionsConfig(AppConfig):
    name = "completions"
