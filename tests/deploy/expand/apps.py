from django.apps import AppConfig


class ExpandConfig(AppConfig):
    name = "tests.deploy.expand"
    label = "weft_expand_test"
