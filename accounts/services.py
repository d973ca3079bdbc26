"""Making, finding and revoking API tokens, and who may see whose."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils.timezone import now

from annotation.models import Role

from .keys import key_digest, new_key
from .models import ApiToken, password_stamp

# last_used_at is written at most this often per token: it answers "is this token still in
# use?", and one write per API request would cost more than that answer is worth.
LAST_USED_PRECISION = timedelta(minutes=1)


@transaction.atomic
def token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """Make a token and return it with its key, which nothing can show again."""
    key = new_key()
    token = ApiToken.objects.create(
        user=user, name=name.strip() or "API", digest=key_digest(key), stamp=password_stamp(user)
    )
    return token, key


def token_for_key(key: str) -> ApiToken | None:
    return ApiToken.objects.select_related("user").filter(digest=key_digest(key)).first()


def token_touch(*, token: ApiToken) -> None:
    moment = now()
    if token.last_used_at is None or moment - token.last_used_at >= LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=moment)
        token.last_used_at = moment


def tokens_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[ApiToken]:
    """One's own tokens; a lead's, also those of the annotators of the projects they lead;
    a superuser's, all.

    Leads look after the people who judge in their projects (a lost laptop, someone who
    left): revoking only takes access away, and the owner can make a new token. Other leads
    and superusers answer for themselves, so their tokens stay out of a lead's reach.
    """
    tokens = ApiToken.objects.select_related("user")
    if not isinstance(user, User):  # anonymous
        return tokens.none()
    if user.is_superuser:
        return tokens.all()
    # One filter() call: the role and the project are conditions on the same membership row.
    led_annotator = Q(
        user__memberships__role=Role.ANNOTATOR,
        user__memberships__project__memberships__user=user,
        user__memberships__project__memberships__role=Role.LEAD,
        user__is_superuser=False,
    )
    return tokens.filter(Q(user=user) | led_annotator).distinct()


def token_revoke(*, token: ApiToken) -> None:
    token.delete()
