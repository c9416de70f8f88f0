"""manage.py weft_api_key create USERNAME [--name NAME] [--budget TOKENS] | list [USERNAME] | revoke PREFIX

`create` prints the new secret alone on its last line (for scripts:
`KEY=$(manage.py weft_api_key create alice | tail -1)`); it is never shown again."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from api.models import ApiKey, TooManyKeys


class Command(BaseCommand):
    help = "Create, list or revoke API keys."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="make a key; prints its secret on the last line")
        create.add_argument("username")
        create.add_argument("--name", default="cli")
        create.add_argument("--budget", type=int, help="monthly tokens (default: the setting)")
        listing = sub.add_parser("list", help="keys with prefix, owner, state and budget")
        listing.add_argument("username", nargs="?")
        revoke = sub.add_parser("revoke", help="revoke a key by its prefix")
        revoke.add_argument("prefix")

    def handle(self, *args, action: str, **options):
        getattr(self, f"_{action}")(**options)

    def _create(self, username: str, name: str, budget: int | None, **options) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        if budget is not None and budget < 0:
            raise CommandError("--budget must be >= 0")
        try:
            key, secret = ApiKey.objects.create_key(user, name, budget=budget)
        except TooManyKeys as refusal:
            raise CommandError(str(refusal)) from None
        self.stdout.write(f"created key {key.name!r} ({key.prefix}) for {username}, "
                          f"budget {key.budget_tokens():,} tokens/month")  # fmt: skip
        self.stdout.write(secret)

    def _list(self, username: str | None, **options) -> None:
        keys = ApiKey.objects.select_related("user").order_by("created_at", "id")
        if username:
            keys = keys.filter(user__username=username)
        for key in keys:
            state = f"revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else "active"
            used = f"{key.last_used_at:%Y-%m-%d %H:%M}" if key.last_used_at else "never"
            self.stdout.write(
                f"{key.prefix}\t{key.user.get_username()}\t{key.name}\t{state}\t"
                f"budget {key.budget_tokens()}\tlast used {used}"
            )

    def _revoke(self, prefix: str, **options) -> None:
        key = ApiKey.objects.filter(prefix=prefix.removesuffix("…")).first()
        if key is None:
            raise CommandError(f"no key with prefix {prefix!r}")
        key.revoke()
        self.stdout.write(f"revoked {key.prefix} ({key.name}, {key.user.get_username()})")
