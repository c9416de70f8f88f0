import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from config.env import DATA_DIR


class Command(BaseCommand):
    help = "Creates the local account once and prints its credentials on one line."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="weft")

    def handle(self, *args, username: str, **options):
        User = get_user_model()
        secret_file = DATA_DIR / f"local-account-{settings.DATABASES['default']['NAME']}"
        stored = secret_file.read_text().strip() if secret_file.exists() else ""
        user = User.objects.filter(username=username).first()
        if user is None or not stored:
            password = stored or secrets.token_urlsafe(12)
            if user is None:
                user = User.objects.create_superuser(username=username, password=password)
            elif not user.check_password(password):
                # No stored copy to show: give the account a fresh password we can print.
                user.set_password(password)
                user.save(update_fields=["password"])
            DATA_DIR.mkdir(parents=True, exist_ok=True)
            secret_file.write_text(password)
            secret_file.chmod(0o600)
            stored = password
        if user.check_password(stored):
            self.stdout.write(f"username: {username}  password: {stored}")
        else:
            self.stdout.write(
                f"username: {username}  password: (changed since first start; not shown)"
            )
