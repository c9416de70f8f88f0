"""Optional mail (off unless WEFT_NOTIFY_EMAIL is set): staff hear of new feedback and
budget requests at that address, and a user with an email address hears the answer
to their request. Sent through Django's email backend after the row is committed; a
failure is logged by its type only (a message may hold whatever the user pasted)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.mail import send_mail

log = logging.getLogger(__name__)


def _send(subject: str, body: str, to: list[str]) -> None:
    if not settings.WEFT_NOTIFY_EMAIL or not to:
        return
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, to)
    except Exception as exc:  # the row is stored; the mail is a courtesy
        log.warning("feedback mail not sent: %s", type(exc).__name__)


def new_feedback(item: Any) -> None:
    _send(
        f"Weft feedback {item.pk} from {item.owner}",
        f"Page: {item.page_url}\nTime: {item.reported_at:%Y-%m-%d %H:%M:%S} UTC\n"
        f"Request id: {item.request_id or '-'}\n\n{item.message}\n",
        [settings.WEFT_NOTIFY_EMAIL],
    )


def new_budget_request(item: Any) -> None:
    _send(
        f"Weft budget request {item.pk} from {item.owner}",
        f"{item.amount:,} more tokens a month for {item.target}.\n\n{item.reason}\n",
        [settings.WEFT_NOTIFY_EMAIL],
    )


def decision(item: Any) -> None:
    email = getattr(item.owner, "email", "")
    _send(
        f"Your Weft budget request was {item.state}",
        f"{item.amount:,} more tokens a month for {item.target}: {item.state}."
        + (
            f"\nThe budget is now {item.budget_after:,} tokens a month."
            if item.budget_after
            else ""
        )
        + (f"\n\n{item.reply}" if item.reply else "")
        + "\n",
        [email] if email else [],
    )
