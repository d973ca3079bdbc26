"""The lead's adjudication pages: the queue of disagreements, one pair with every judge's
answer side by side, and promoting a ruling into the protocol draft. Leads only: they name the
judges and show their grades, which annotators must never see."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from annotation.access import Access, project_for_lead
from annotation.models import Project
from judging.answers import current_answers
from judging.highlight import shown_document
from judging.models import GoldItem
from judging.views import grade_labels
from pooling.models import Pair

from .models import Adjudication
from .services_adjudication import (
    AdjudicationError,
    adjudication_create,
    adjudication_promote,
    adjudication_queue,
    default_question,
    latest_adjudications,
    next_in_queue,
)

PER_PAGE = 50


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # login_required let only signed-in users through
    return request.user


@login_required
def adjudicate_queue(request: HttpRequest, slug: str) -> HttpResponse:
    """Open disagreements, the widest and best-ranked first; `?show=adjudicated` lists the
    pairs already settled, newest first."""
    access = _get_project_for_lead(request, slug)
    project = access.project
    state = adjudication_queue(project=project)
    show = "adjudicated" if request.GET.get("show") == "adjudicated" else "open"
    number = request.GET.get("page")
    context: dict[str, Any] = {
        "project": project,
        "counts": state.counts,
        "show": show,
        "open_count": len(state.queue),
    }
    if show == "open":
        page = Paginator(state.queue, PER_PAGE).get_page(number)
        pairs = _pairs(project, [d.pair_id for d in page.object_list])
        context.update(page=page, rows=[(d, pairs[d.pair_id]) for d in page.object_list])
    else:
        settled = latest_adjudications(project=project).select_related(
            "pair__query", "pair__document", "lead"
        )
        ordered = settled.order_by("-created_at", "-pk")
        context["page"] = Paginator(ordered, PER_PAGE).get_page(number)
    return render(request, "agreement/adjudicate_queue.html", context)


def _pairs(project: Project, ids: list[int]) -> dict[int, Pair]:
    rows = Pair.objects.select_related("query", "document").filter(
        pk__in=ids, query__project=project
    )
    return {pair.pk: pair for pair in rows}


@login_required
def adjudicate_pair(request: HttpRequest, slug: str, pair_id: int) -> HttpResponse:
    """One pair: the query, the document and every judge's current answer; the lead's final
    grade and ruling are saved as a new adjudication, and the next pair of the queue follows."""
    access = _get_project_for_lead(request, slug)
    project = access.project
    pair = get_object_or_404(
        Pair.objects.select_related("query", "document"), pk=pair_id, query__project=project
    )
    if request.method == "POST":
        try:
            adjudication_create(
                pair=pair,
                lead=_user(request),
                grade=_grade(request.POST.get("grade", "")),
                ruling=request.POST.get("ruling", ""),
            )
        except AdjudicationError as error:
            messages.error(request, f"Not saved: {error}")
            return _pair_page(request, access, pair, status=400)
        return _after_saving(request, project, pair)
    return _pair_page(request, access, pair)


def _grade(raw: str) -> int:
    return int(raw) if raw.strip().isdigit() and len(raw.strip()) == 1 else -1


def _after_saving(request: HttpRequest, project: Project, pair: Pair) -> HttpResponse:
    saved = f"Saved the final grade of {pair.query.qid} / {pair.document.docid}."
    following = next_in_queue(project=project)
    if following is None:
        messages.info(request, f"{saved} No disagreement is left to adjudicate.")
        return redirect("adjudicate_queue", slug=project.slug)
    messages.info(request, f"{saved} Here is the next disagreement.")
    return redirect("adjudicate_pair", slug=project.slug, pair_id=following)


def _pair_page(request: HttpRequest, access: Access, pair: Pair, status: int = 200) -> HttpResponse:
    project = access.project
    shown = shown_document(pair.query.text, pair.document.title, pair.document.text)
    past = list(pair.adjudications.select_related("lead").order_by("-pk"))
    gold = GoldItem.objects.filter(pair=pair, retired_at=None).exists()
    context = {
        "project": project,
        "pair": pair,
        "answers": current_answers(project_id=project.pk, pair_id=pair.pk),
        "past": past,
        "standing": past[0] if past else None,
        "gold": gold,
        "question": default_question(pair),
        "grades": grade_labels(project.current_protocol()),
        # Safe: shown_document() escapes every character of the untrusted text itself.
        "doc_title": mark_safe(shown.title),
        "doc_text": mark_safe(shown.text),
        "doc_cut": (shown.text_shown, shown.text_length) if shown.truncated else None,
        "ruling": request.POST.get("ruling", "") if request.method == "POST" else "",
    }
    return render(request, "agreement/adjudicate_pair.html", context, status=status)


@login_required
@require_POST
def adjudication_promote_view(
    request: HttpRequest, slug: str, adjudication_id: int
) -> HttpResponse:
    """Add the ruling to the protocol draft as an edge case with the pair as its anchor."""
    access = _get_project_for_lead(request, slug)
    adjudication = get_object_or_404(
        Adjudication.objects.select_related("pair"),
        pk=adjudication_id,
        pair__query__project=access.project,
    )
    back = redirect("adjudicate_pair", slug=slug, pair_id=adjudication.pair_id)
    question = request.POST.get("question", "")
    try:
        promotion = adjudication_promote(
            adjudication=adjudication, lead=_user(request), question=question
        )
    except AdjudicationError as error:
        messages.error(request, str(error))
        return back
    note = (
        "Added to the protocol draft as an edge case, with this pair as its anchor. Publish "
        "the draft from the protocol editor; annotators are then asked to read what changed."
    )
    if promotion.gold_retired:
        note += " The pair was a gold item: it is retired, since the anchor shows its grade."
    messages.info(request, note)
    return back
