"""The settings of `migrate` in the topology test's expand step: Weft's, plus the app
holding the migration to apply."""

from config.settings import *  # noqa: F403
from config.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.deploy.expand"]
