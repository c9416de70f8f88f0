"""`manage.py check --deploy`: deploy/weft.env's placeholders must be replaced."""

from __future__ import annotations

import os
from typing import Any

from django.core import checks

PLACEHOLDER = "CHANGE"
# Read from the environment: what the operator was told to change (deploy/weft.env).
MUST_CHANGE = ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "WEFT_BACKENDS", "WEFT_METRICS_TOKEN")


@checks.register(checks.Tags.security, deploy=True)
def placeholders_replaced(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    left = [name for name in MUST_CHANGE if PLACEHOLDER in os.environ.get(name, "")]
    return [
        checks.Error(
            f"{name} is still deploy/weft.env's placeholder",
            hint="set it to this deployment's own value (docs/deploy.md)",
            id="weft.E001",
        )
        for name in left
    ]
