"""Log-in forms that refuse a client after too many failures (limiter.py), for the site and the Django admin."""

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from dataplatform.client_address import client_ip

from . import limiter


def _wait_text(seconds: int) -> str:
    minutes = -(-seconds // 60)  # rounded up: "in 1 minute" rather than "in 0 minutes"
    if seconds >= 60:
        return ngettext("%(count)d minute", "%(count)d minutes", minutes) % {"count": minutes}
    return ngettext("%(count)d second", "%(count)d seconds", seconds) % {"count": seconds}


class ThrottledLoginMixin:
    """Checks the failure counters before the password, and counts a failed attempt after it.

    The lock-out message is the same whether or not the username exists, and a locked-out client's
    password is not checked at all.
    """

    retry_after: int | None = None

    def clean(self):
        ip = client_ip(self.request) if self.request is not None else "unknown"
        username = self.data.get("username", "") or ""
        wait = limiter.login_retry_after(ip=ip, username=username)
        if wait:
            self.retry_after = wait
            raise ValidationError(
                _("Too many failed log-in attempts from your address. Try again in %(wait)s.") % {"wait": _wait_text(wait)},
                code="locked_out",
            )
        try:
            return super().clean()
        except ValidationError:
            limiter.record_login_failure(ip=ip, username=username)
            raise


class ThrottledAuthenticationForm(ThrottledLoginMixin, AuthenticationForm):
    error_messages = {**AuthenticationForm.error_messages,
                      "invalid_login": gettext_lazy("Your username and password did not match. Try again.")}


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass
