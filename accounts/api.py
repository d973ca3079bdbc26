"""API tokens over the API: make one with a password, list the ones you may see, revoke."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assay.api import ErrorOut

from .models import ApiToken
from .services import token_create, token_revoke, tokens_visible_to


class TokenIn(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)
    name = serializers.CharField(max_length=100, required=False, default="API")


class TokenCreatedOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    token = serializers.CharField(help_text="the key: shown this once, never again")


class TokenOut(serializers.Serializer):
    id = serializers.IntegerField()
    user = serializers.CharField(source="user.username")
    name = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True, help_text="to the minute")


def _signed_in(request: Request, data: dict[str, Any]) -> User | None:
    # The Django request, not DRF's wrapper: the sign-in throttle marks the request it is given,
    # and its middleware reads the mark from the Django request to answer 429.
    user = authenticate(request._request, username=data["username"], password=data["password"])
    return user if isinstance(user, User) else None


class TokenCreateView(APIView):
    authentication_classes: list[type] = []  # a password, not a session: no CSRF to check
    permission_classes = [AllowAny]

    @extend_schema(
        request=TokenIn,
        responses={
            200: TokenCreatedOut,
            400: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="wrong credentials (`detail`), or a field missing or too long "
                "(the field's name with its errors)",
            ),
            429: OpenApiResponse(ErrorOut, description="too many failed sign-ins; Retry-After"),
        },
        summary="Make a new API token with your username and password",
        description="Send the key as `Authorization: Token <key>`. Each call makes a new token; "
        "list and revoke them at /api/tokens/. Failed sign-ins are throttled (429).",
    )
    def post(self, request: Request) -> Response:
        given = TokenIn(data=request.data)
        given.is_valid(raise_exception=True)
        user = _signed_in(request, given.validated_data)
        if user is None:
            return Response(
                {"detail": "Unable to sign in with these credentials."},
                status=status.HTTP_400_BAD_REQUEST,
            )
        token, key = token_create(user=user, name=given.validated_data["name"])
        return Response({"id": token.pk, "name": token.name, "token": key})


class TokenListView(APIView):
    @extend_schema(
        responses=TokenOut(many=True),
        summary="The API tokens you may see and revoke",
        description="Your own; a lead's also those of the annotators of the projects they "
        "lead; a superuser's, all. Keys are never shown again.",
    )
    def get(self, request: Request) -> Response:
        return Response(TokenOut(tokens_visible_to(request.user), many=True).data)


class TokenDetailView(APIView):
    @extend_schema(
        responses={204: None, 404: ErrorOut},
        summary="Revoke an API token (it stops working at once)",
    )
    def delete(self, request: Request, pk: int) -> Response:
        token: ApiToken = get_object_or_404(tokens_visible_to(request.user), pk=pk)
        token_revoke(token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)
