"""The login throttle's records (django-axes) in the admin, with the permission each
action needs: unlocking — forgetting the selected failed logins — is deleting them."""

from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt
from django.contrib import admin, messages
from django.utils import timezone

admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class LoginAttemptAdmin(AccessAttemptAdmin):
    actions = ["unlock", "cleanup_expired_attempts"]

    @admin.action(description="Unlock: forget the selected failed logins", permissions=["delete"])
    def unlock(self, request, queryset) -> None:
        count, _ = queryset.delete()
        self.message_user(request, f"Unlocked: {count} record(s) of failed logins forgotten.",
                          messages.SUCCESS)  # fmt: skip

    @admin.action(description="Clean up expired attempts", permissions=["delete"])
    def cleanup_expired_attempts(self, request, queryset) -> None:
        # axes reads the cool-off's start from the request, which only its login
        # handling sets: the admin's own action was a 500 without it.
        request.axes_attempt_time = timezone.now()
        super().cleanup_expired_attempts(request, queryset)
