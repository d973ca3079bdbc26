"""The account page: your API tokens (and, for leads, your annotators'), made and revoked."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from .services import token_create, token_revoke, tokens_visible_to


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
