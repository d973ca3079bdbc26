"""The leads' gold page: the share of gold checks in every annotator's queue, the gold items
(retire), the pairs that could be gold (mark), and accuracy on gold per annotator over time.
Annotators get 403, outsiders 404, like every lead page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotation.access import Access, project_for_lead
from annotation.models import Membership, Project, Role
from judging.gold import gold_accuracy, gold_checks
from judging.services import JudgingError, gold_share_set
from judging.services_claims import gold_received, policy_of
from pooling.models import Pair

from .gold import GoldRefused, gold_candidates, gold_keys, gold_mark, gold_retire, gold_rows
from .gold_chart import accuracy_chart
from .models import AgreementSettings

CANDIDATES_PER_PAGE = 50


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


@login_required
def gold_items(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    project = access.project
    checks = gold_checks(project_id=project.pk)
    keys = gold_keys(project=project)
    people = gold_accuracy(checks)
    settings = AgreementSettings.objects.filter(project=project).first() or AgreementSettings()
    page = Paginator(gold_candidates(project=project, keys=keys), CANDIDATES_PER_PAGE)
    received = gold_received(project_id=project.pk)
    weeks = sorted({week for person in people for week in person.weeks})
    context = {
        "project": project,
        "policy": policy_of(project),
        "rows": gold_rows(project=project, keys=keys, checks=checks),
        "candidates": page.get_page(request.GET.get("page")),
        "people": [(p, [p.weeks.get(w) for w in weeks]) for p in people],
        "weeks": weeks,
        "min_accuracy": settings.min_gold_accuracy,
        "received": _received_rows(project, received),
        "chart": accuracy_chart(
            [(p.username, {w: (a.correct, a.checks) for w, a in p.weeks.items()}) for p in people]
        ),
    }
    return render(request, "agreement/gold.html", context)


def _received_rows(
    project: Project, received: dict[int, tuple[int, int]]
) -> list[dict[str, object]]:
    """Per member who has received items: gold received, all received, and the share."""
    # Annotators only: leads get no gold checks (their grades are where keys come from).
    annotators = Membership.objects.filter(project=project, role=Role.ANNOTATOR)
    names = dict(
        annotators.filter(user_id__in=list(received)).values_list("user_id", "user__username")
    )
    return [
        {"username": names[user], "gold": gold, "all": every, "share": gold / every}
        for user, (gold, every) in sorted(received.items(), key=lambda kv: names.get(kv[0], ""))
        if every and user in names
    ]


def _pair(access: Access, pair_id: int) -> Pair:
    return get_object_or_404(
        Pair.objects.select_related("query", "document"),
        pk=pair_id,
        query__project=access.project,
    )


@login_required
@require_POST
def gold_mark_view(request: HttpRequest, slug: str, pair_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    pair = _pair(access, pair_id)
    try:
        item = gold_mark(project=access.project, pair=pair, lead=request.user)  # type: ignore[arg-type]
        messages.info(
            request, f"{pair.query.qid}/{pair.document.docid} is gold, grade {item.grade}."
        )
    except GoldRefused as error:
        messages.error(request, str(error))
    return redirect("gold_items", slug=slug)


@login_required
@require_POST
def gold_retire_view(request: HttpRequest, slug: str, pair_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    pair = _pair(access, pair_id)
    try:
        gold_retire(project=access.project, pair=pair)
        messages.info(request, f"{pair.query.qid}/{pair.document.docid} is no longer gold.")
    except GoldRefused as error:
        messages.error(request, str(error))
    return redirect("gold_items", slug=slug)


@login_required
@require_POST
def gold_share_view(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    try:
        share = _percent(request.POST.get("gold_share_percent", "")) / 100
        gold_share_set(project=access.project, share=share)
        messages.info(request, f"Gold share saved: {share * 100:g} % of every annotator's items.")
    except JudgingError as error:
        messages.error(request, f"Not saved: {error}")
    return redirect("gold_items", slug=slug)


def _percent(raw: str) -> float:
    try:
        return float(raw.strip())
    except ValueError as error:
        raise JudgingError("the gold share must be a number of percent, such as 5") from error
