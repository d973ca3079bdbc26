"""What every API endpoint shares: bounded JSON in, JSON out for every error, errors in the schema.

- :mod:`assay.api_parsers` refuses JSON bodies nested too deep (a module of its own: DRF
  imports the parsers while it builds its views, which this module imports).
- :func:`exception_handler` gives every error one shape, :class:`ErrorOut`: ``detail`` (one
  line a person can read) and, for invalid fields, ``errors`` (field -> messages).
- :func:`not_found` and friends answer JSON for ``/api/`` paths that reach no API view (a
  slug that is not a slug, a mistyped path); other paths keep the HTML pages.
- :class:`AutoSchema` documents the errors any operation can answer (400/415 with a body,
  401/403 when signing in is required, 404 with path parameters, 429 when throttled), so an
  endpoint declares only its own (409 ...), and a new endpoint is documented without trying.

No app imports: apps import this module, not the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

__all__ = [
    "AutoSchema",
    "ErrorOut",
    "exception_handler",
    "is_api",
    "not_found",
]

API_PREFIX = "/api/"


def is_api(request: HttpRequest) -> bool:
    """Whether a request is the API's, which answers JSON (errors and refusals included)."""
    return request.path.startswith(API_PREFIX)


class ErrorOut(serializers.Serializer):
    """The body of every error answer of the API."""

    detail = serializers.CharField(help_text="what went wrong, in one line")
    # The serializer's metaclass takes declared fields out of the class, so this does not hide
    # Serializer.errors; only the type checker sees a clash.
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="invalid input only: the messages for each field",
    )


def exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response | None:
    """DRF's handler, with every body reshaped as :class:`ErrorOut`."""
    response = drf_exception_handler(exc, dict(context))
    if response is not None:
        response.data = _error_body(response.data)
    return response


def _error_body(data: Any) -> dict[str, Any]:
    if isinstance(data, dict) and set(data) == {"detail"}:
        return {"detail": str(data["detail"])}
    if isinstance(data, dict):
        errors = {str(name): _messages(value) for name, value in data.items()}
        listed = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in errors.items())
        return {"detail": f"invalid input - {listed}", "errors": errors}
    return {"detail": " ".join(_messages(data))}


def _messages(value: Any) -> list[str]:
    """A field's messages, flat (a nested serializer's are prefixed with their field)."""
    if isinstance(value, dict):
        return [f"{name}: {m}" for name, inner in value.items() for m in _messages(inner)]
    if isinstance(value, list):
        return [m for inner in value for m in _messages(inner)]
    return [str(value)]


# ----------------------------------------------------------------- errors outside the views


def _json_for_api(
    status: int, detail: str, page: Callable[..., HttpResponse]
) -> Callable[..., HttpResponse]:
    def handler(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if is_api(request):
            return JsonResponse({"detail": detail}, status=status)
        return page(request, *args, **kwargs)

    return handler


# Django's handlers for errors no view answered (handler404 & co. in assay/urls.py).
not_found = _json_for_api(404, "Not found.", defaults.page_not_found)
bad_request = _json_for_api(400, "Bad request.", defaults.bad_request)
permission_denied = _json_for_api(403, "Permission denied.", defaults.permission_denied)
server_error = _json_for_api(500, "Server error.", defaults.server_error)


# ----------------------------------------------------------------- schema


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's schema, with the errors every operation of its kind can answer."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for code in self._error_codes():
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorOut, code, None, direction)
        return responses

    def _error_codes(self) -> list[str]:
        codes = []
        if self.method in ("POST", "PUT", "PATCH"):
            codes += ["400", "415"]  # a body that does not parse or validate, or of another type
        if not all(isinstance(p, AllowAny) for p in self.view.get_permissions()):
            codes += ["401", "403"]  # 401 with a token scheme first, 403 with the session first
        if "{" in self.path:
            codes.append("404")  # a project you are not a member of is not found
        if self.view.get_throttles():
            codes.append("429")
        return codes
