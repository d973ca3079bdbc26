"""A liveness probe for load balancers and container health checks."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse


def healthz(request: HttpRequest) -> HttpResponse:
    # Touch the database: a web process that cannot reach it is not healthy.
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return HttpResponse("ok\n", content_type="text/plain")
