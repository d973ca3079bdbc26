"""Response headers that every page and API answer carries."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers


def no_store_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Tell browsers and proxies to keep no copy of any page or API answer.

    Nearly every page shows documents, judgments or the people who made them, and the rest
    (sign-in, errors) gain nothing from a cache; one rule for all is simpler to trust than a
    list of views. Static files are served before this middleware and stay cacheable.
    """

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        add_never_cache_headers(response)
        return response

    return middleware
