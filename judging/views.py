"""The judging page: one item of the annotator's claimed query at a time, keyboard first,
swapped in by htmx. Nothing here ever shows another judge's work, a system, a rank or a score."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from annotation.access import Access, project_for_member
from annotation.models import Project, ProtocolVersion
from annotation.protocol import from_content
from annotation.services_protocol import protocol_ack
from pooling.models import Pool

from .access import pool_or_404
from .highlight import shown_document
from .models import Grade
from .services import (
    Answer,
    JudgingError,
    NoSuchItem,
    NotYours,
    ProtocolChanged,
    Screen,
    ShownItem,
    Submitted,
    claim_active,
    current_pool,
    judgment_submit,
    judgment_undo_last,
    screen_for,
)
from .services_claims import claim_release

PANEL = "judging/judge.html#panel"


def _get_project_for_judge(request: HttpRequest, slug: str) -> Access:
    # Leads may judge too; every member judges only through their own claims.
    return project_for_member(request, slug)


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # login_required let only signed-in users through
    return request.user


def grade_labels(protocol: ProtocolVersion | None) -> list[tuple[int, str]]:
    """Grade buttons: the protocol's short labels when it defines them."""
    defined = (
        {g.value: g.label for g in from_content(protocol.content or {}).grades} if protocol else {}
    )
    return [
        (value, defined.get(value, label.split("·", 1)[-1].strip()))
        for value, label in Grade.choices
    ]


def _document(item: ShownItem) -> dict[str, Any]:
    shown = shown_document(item.query_text, item.title, item.text)
    # Safe: shown_document() escapes every character of the untrusted text itself.
    return {
        "doc_title": mark_safe(shown.title),
        "doc_text": mark_safe(shown.text),
        "doc_cut": (shown.text_shown, shown.text_length) if shown.truncated else None,
    }


def _urls(slug: str, item: ShownItem | None) -> dict[str, str]:
    # Reversed here once rather than by {% url %} tags: the panel is rendered on every answer.
    urls = {
        "undo_url": reverse("judge_undo", args=[slug]),
        "release_url": reverse("judge_release", args=[slug]),
    }
    if item is not None:
        urls["submit_url"] = reverse("judge_submit", args=[slug, item.pk])
    return urls


def panel_context(project: Project, pool: Pool | None, screen: Screen | None) -> dict[str, Any]:
    context: dict[str, Any] = {"project": project, "pool": pool, "screen": screen}
    if screen is None:
        return context
    context.update(
        protocol=screen.protocol,
        grades=grade_labels(screen.protocol),
        key=uuid.uuid4(),
        undo_key=uuid.uuid4(),
        **_urls(project.slug, screen.item),
    )
    if screen.item is not None:
        context.update(_document(screen.item))
    if screen.unclaimed:
        context["claim_url"] = reverse("judge_claim", args=[project.slug])
    return context


def _panel(
    request: HttpRequest,
    project: Project,
    pool: Pool,
    error: str = "",
    status: int = 200,
    after: Submitted | None = None,
) -> HttpResponse:
    if not request.htmx:  # type: ignore[attr-defined]
        if error:
            return HttpResponse(error, status=status, content_type="text/plain; charset=utf-8")
        return redirect("judge", slug=project.slug)
    screen = screen_for(pool=pool, user=_user(request), after=after)
    context = panel_context(project, pool, screen)
    context["error"] = error
    return render(request, PANEL, context, status=status)


@login_required
def judge(request: HttpRequest, slug: str) -> HttpResponse:
    """The page, read only: the item of the query the person holds; when they hold none, a
    panel that claims one by POST as soon as it loads (`judge_claim`)."""
    access = _get_project_for_judge(request, slug)
    pool = current_pool(access.project)
    screen = screen_for(pool=pool, user=_user(request), take=False) if pool else None
    return _page(request, access.project, pool, screen)


def _page(
    request: HttpRequest, project: Project, pool: Pool | None, screen: Screen | None
) -> HttpResponse:
    context = panel_context(project, pool, screen)
    protocol = screen.protocol if screen else project.current_protocol()
    context["protocol"] = protocol
    context["structure"] = from_content(protocol.content or {}) if protocol else None
    return render(request, "judging/judge.html", context)


@login_required
@require_POST
def judge_claim(request: HttpRequest, slug: str) -> HttpResponse:
    """Claim the next query when the person holds none (or has finished theirs) and show its
    first item; the item held, if any, otherwise."""
    access = _get_project_for_judge(request, slug)
    pool = pool_or_404(access)
    if not request.htmx:  # type: ignore[attr-defined]
        screen = screen_for(pool=pool, user=_user(request))  # claims when one is left
        if screen.item is None and screen.change is None:
            # Nothing left: the page read afterwards would offer "Start judging" again, so
            # say "All done" here (posting it again changes nothing).
            return _page(request, access.project, pool, screen)
        return redirect("judge", slug=slug)
    return _panel(request, access.project, pool)


def _key(request: HttpRequest, name: str = "key") -> uuid.UUID | None:
    try:
        return uuid.UUID(request.POST.get(name, ""))
    except ValueError:
        return None


@require_POST
@login_required
def judge_submit(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    access = _get_project_for_judge(request, slug)
    pool = pool_or_404(access)
    key = _key(request)
    if key is None:
        return _panel(request, access.project, pool, "the submission key is missing", 400)
    try:
        answer = _answer(request)
        done = judgment_submit(
            pool=pool, user=_user(request), item_id=item_id, answer=answer, key=key
        )
    except NoSuchItem as error:
        raise Http404(str(error)) from error
    except (NotYours, ProtocolChanged) as error:
        return _panel(request, access.project, pool, str(error), 409)
    except JudgingError as error:
        return _panel(request, access.project, pool, str(error), 400)
    return _panel(request, access.project, pool, after=done)


def _answer(request: HttpRequest) -> Answer:
    """The answer a judging form posted (raises BadAnswer)."""
    post = request.POST
    return Answer.parse(
        post.get("kind", "grade"), post.get("grade"), post.get("note", ""), post.get("seconds", 0)
    )


@login_required
@require_POST
def judge_undo(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_judge(request, slug)
    pool = pool_or_404(access)
    key = _key(request)
    if key is None:
        return _panel(request, access.project, pool, "the submission key is missing", 400)
    try:
        judgment_undo_last(pool=pool, user=_user(request), key=key)
    except (NotYours, ProtocolChanged) as error:
        return _panel(request, access.project, pool, str(error), 409)
    return _panel(request, access.project, pool)


@login_required
@require_POST
def judge_release(request: HttpRequest, slug: str) -> HttpResponse:
    """Give the current query back; the next one is claimed at once."""
    access = _get_project_for_judge(request, slug)
    pool = pool_or_404(access)
    claim = claim_active(pool=pool, user=_user(request))
    if claim is not None:
        claim_release(claim=claim)
    return _panel(request, access.project, pool)


@login_required
@require_POST
def judge_acknowledge(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    access = _get_project_for_judge(request, slug)
    pool = pool_or_404(access)
    version = get_object_or_404(access.project.protocols, number=number)
    protocol_ack(version=version, user=_user(request))
    return _panel(request, access.project, pool)
