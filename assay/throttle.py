"""Sign-in throttling: django-axes, with the project's lockout answer and reset rule.

Axes counts failed sign-ins per account and per address (settings: AXES_*). Two things are the
project's own: what a refused sign-in looks like (a page for the form, JSON for the API, both
429 with Retry-After), and what a successful sign-in clears.
"""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from assay.api import is_api

LOCKED_OUT = "Too many failed sign-ins for this account or address. Try again in {minutes} minutes."


class AccountResetHandler(AxesDatabaseHandler):
    """Axes's database handler, but a successful sign-in clears the account's failures only.

    Axes's own reset deletes every failure that matches the sign-in's parameters, the address's
    included: someone with an account could then sign in between guesses at another account
    from the same address and never reach the limit.
    """

    def reset_user_attempts(
        self, request: HttpRequest, credentials: dict[str, Any] | None = None
    ) -> int:
        username = get_client_username(request, credentials)
        deleted, _ = AccessAttempt.objects.filter(username=username).delete()
        return deleted


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    cool_off = get_cool_off(request)
    seconds = int(cool_off.total_seconds()) if cool_off else 0
    message = LOCKED_OUT.format(minutes=max(1, round(seconds / 60)))
    response: HttpResponse
    if is_api(request):
        response = JsonResponse({"detail": message}, status=429)
    else:
        response = render(request, "registration/locked_out.html", {"message": message}, status=429)
    response["Retry-After"] = str(seconds)
    return response
