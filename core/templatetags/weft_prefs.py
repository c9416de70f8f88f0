"""{% plain_view_class %}: the body class of a user who reads token views plain."""

from django import template

from core.models import Preferences

register = template.Library()


@register.simple_tag(takes_context=True)
def plain_view_class(context) -> str:
    request = context.get("request")
    if request is None:
        return ""
    if not hasattr(request, "_weft_plain_view"):  # one query per request
        request._weft_plain_view = Preferences.objects.plain_view(request.user)
    return "plain-view" if request._weft_plain_view else ""
