"""A liveness probe for load balancers and container health checks."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, HttpResponse

PATH = "/healthz"


def healthz(request: HttpRequest) -> HttpResponse:
    # Touch the database: a web process that cannot reach it is not healthy.
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return HttpResponse("ok\n", content_type="text/plain")


def health_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Answer the probe before any other middleware looks at the request.

    A probe comes from inside the container or from a load balancer, with a Host header the
    site's ALLOWED_HOSTS need not list and over plain HTTP: further down, Django would answer
    400 or redirect to HTTPS without ever touching the database, and a probe that took that
    for health would miss a dead database. Only this path is answered here.
    """

    def middleware(request: HttpRequest) -> HttpResponse:
        if request.path == PATH and request.method in ("GET", "HEAD"):
            return healthz(request)
        return get_response(request)

    return middleware
