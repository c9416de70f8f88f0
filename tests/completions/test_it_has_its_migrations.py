import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_it_has_no_missing_migrations():
    call_command("makemigrations", "completions", "--check", "--dry-run", verbosity=0)
