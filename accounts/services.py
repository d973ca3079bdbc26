"""Making, finding and revoking API tokens, and who may see whose; new accounts and their
one-time sign-in links."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.contrib.auth.tokens import default_token_generator
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_decode, urlsafe_base64_encode
from django.utils.timezone import now

from annotation.models import Membership, Project, Role
from annotation.services import membership_set

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


# --- New accounts and their one-time sign-in links ----------------------------------------------
# A lead adds an annotator who has no account yet: the account is made without a usable
# password, and the lead passes on a link to a page where its owner chooses one. The link is
# Django's password-reset token: an HMAC of the account's password hash, last sign-in and the
# time, so it is stored nowhere, stops working once a password is set (the hash changes), and
# expires after PASSWORD_RESET_TIMEOUT. A link rather than a password made up for the person:
# a password would be known to the lead for as long as its owner kept it.


class AccountError(ValueError):
    """An account that cannot be made, or a link that cannot be given; says why."""


@dataclass(frozen=True)
class SignInLink:
    """Where a new account's owner sets a password (a path: pages and commands add the
    site's address), and until when it works."""

    user: User
    path: str
    expires_at: datetime


def username_problem(username: str) -> str:
    """Why ``username`` cannot name a new account ("" when it can)."""
    field = User._meta.get_field("username")
    if not username:
        return "Give a username."
    if len(username) > (field.max_length or 150):
        return f"A username has at most {field.max_length} characters."
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError:
        return f"{username!r} cannot be a username: use letters, digits and @ . + - _ only."
    return ""


def member_invite(*, project: Project, username: str, role: Role) -> SignInLink:
    """Make an account with no usable password, give it ``role`` in ``project``, and return
    its one-time sign-in link (show it once; it is stored nowhere)."""
    problem = username_problem(username)
    if problem:
        raise AccountError(problem)
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username)  # no password: unusable
            membership_set(project=project, user=user, role=role)
    except IntegrityError:  # made by someone else a moment ago
        raise AccountError(f"An account named {username!r} exists already.") from None
    return signin_link(user=user, project=project)


def signin_link(*, user: User, project: Project) -> SignInLink:
    """A fresh sign-in link. Earlier links of the account stop working: the unusable password
    they were made against is replaced by a new one."""
    user.set_unusable_password()
    user.save(update_fields=["password"])
    uidb64 = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    path = reverse("account_welcome", args=[uidb64, token])
    path += "?" + urlencode({"next": reverse("project_detail", args=[project.slug])})
    expires_at = now() + timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)
    return SignInLink(user=user, path=path, expires_at=expires_at)


def signin_link_refusal(*, by: User | None, user: User) -> str:
    """Why ``by`` may not make a new sign-in link for ``user`` ("" when they may); ``by`` is
    None for the server's operator (a command).

    Only for an account that has never had a password, and, for a lead, only one whose every
    project is one they lead: a link signs in as its owner, and a lead of one project must not
    gain the account of someone another lead has invited.
    """
    if user.has_usable_password():
        return (
            f"{user.username} has set a password already and signs in with it; a forgotten "
            "password is reset by an administrator."
        )
    if not user.is_active or user.is_staff or user.is_superuser:
        return f"A sign-in link cannot be made for {user.username} here; ask an administrator."
    if by is None or by.is_superuser:
        return ""
    led = Membership.objects.filter(user=by, role=Role.LEAD).values("project_id")
    if user.memberships.exclude(project_id__in=led).exists():
        return (
            f"{user.username} belongs to a project you do not lead: ask its lead or an "
            "administrator for a new link."
        )
    return ""


def signin_link_user(*, uidb64: str, token: str) -> User | None:
    """The account a sign-in link is for, or None when the link does not work (used, expired,
    replaced by a newer one, or never made here)."""
    try:
        pk = int(urlsafe_base64_decode(uidb64).decode())
    except (ValueError, UnicodeDecodeError):
        return None
    user = User.objects.filter(pk=pk, is_active=True).first()
    if user is None or user.has_usable_password():
        return None
    return user if default_token_generator.check_token(user, token) else None
