"""The account page: your API tokens (and, for leads, your annotators'), made and revoked;
and the page a new account's one-time sign-in link opens, where its owner sets a password."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from .services import signin_link_user, token_create, token_revoke, tokens_visible_to


def _page(request: HttpRequest, *, new_key: str = "", status: int = 200) -> HttpResponse:
    tokens = list(tokens_visible_to(request.user))
    own = [token for token in tokens if token.user_id == request.user.pk]
    others = [token for token in tokens if token.user_id != request.user.pk]
    context = {"own": own, "others": others, "new_key": new_key}
    return render(request, "accounts/account.html", context, status=status)


@login_required
def account(request: HttpRequest) -> HttpResponse:
    return _page(request)


@login_required
@require_POST
def token_new(request: HttpRequest) -> HttpResponse:
    assert isinstance(request.user, User)  # login_required
    name = request.POST.get("name", "")[:100]
    _, key = token_create(user=request.user, name=name)
    # Shown in this answer only (no redirect that would need to carry the key along).
    return _page(request, new_key=key, status=201)


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(tokens_visible_to(request.user), pk=pk)
    token_revoke(token=token)
    messages.success(request, f"Token “{token.name}” of {token.user.username} revoked.")
    return redirect("account")


def welcome(request: HttpRequest, uidb64: str, token: str) -> HttpResponse:
    """A one-time sign-in link: choose a password, then land signed in on the project.

    Setting the password changes the hash the link's token was made from, so the link stops
    working at once; so does a newer link, and time (PASSWORD_RESET_TIMEOUT).
    """
    # The address holds the token; the site's Referrer-Policy (same-origin) keeps it from
    # other sites, and the page links to none.
    user = signin_link_user(uidb64=uidb64, token=token)
    if user is None:
        return render(request, "accounts/welcome.html", {"invalid": True}, status=404)
    form = SetPasswordForm(user, request.POST if request.method == "POST" else None)
    if form.is_valid():
        form.save()
        # Straight in: the owner of the link has just proved it, as a password would.
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.username}: your password is set.")
        return redirect(_next(request))
    status = 400 if form.is_bound else 200
    context = {"form": form, "account": user}
    return render(request, "accounts/welcome.html", context, status=status)


def _next(request: HttpRequest) -> str:
    target = request.GET.get("next", "")
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return "/"
