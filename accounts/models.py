"""API tokens: several per person, each named, revocable, and bound to the password."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import models
from django.utils.crypto import constant_time_compare
from django.utils.timezone import now


def password_stamp(user: AbstractBaseUser) -> str:
    # The hash that ends a user's sessions when the password changes (Django stores it in each
    # session): the same rule ends the user's tokens.
    return user.get_session_auth_hash()


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The key itself is never stored: it is shown once, when the token is made.
    digest = models.CharField(max_length=64, unique=True)
    stamp = models.CharField(max_length=128)
    created_at = models.DateTimeField(default=now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    def matches_password(self) -> bool:
        """True while the user's password is the one the token was made under."""
        return constant_time_compare(self.stamp, password_stamp(self.user))
