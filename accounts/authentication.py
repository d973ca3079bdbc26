"""`Authorization: Token <key>` against the project's own tokens (accounts.models.ApiToken)."""

from __future__ import annotations

from django.contrib.auth.models import User
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from .models import ApiToken
from .services import token_for_key, token_touch


class ApiTokenAuthentication(TokenAuthentication):
    """DRF's header parsing and schema, with a token that dies with the password."""

    def authenticate_credentials(self, key: str) -> tuple[User, ApiToken]:
        token = token_for_key(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        if not token.matches_password():
            raise exceptions.AuthenticationFailed(
                "This token was made before the password changed: make a new one."
            )
        token_touch(token=token)
        return token.user, token
