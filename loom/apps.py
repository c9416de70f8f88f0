from django.apps import AppConfig


class LoomConfig(AppConfig):
    name = "loom"
