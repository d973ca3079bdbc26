"""The lead's judging pages: opening a new pool, progress, throughput, claims (release,
reassign), members, and the full history of an item. Annotators get 403 on every one of them."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.services import (
    AccountError,
    SignInLink,
    member_invite,
    signin_link,
    signin_link_refusal,
)
from annotation.access import Access, project_for_lead
from annotation.models import Project, Role
from annotation.services import membership_set
from jobs.errors import QueueUnavailable
from jobs.services import job_enqueue
from pooling.models import Pair, PoolScope, Run
from pooling.services import PoolingError, new_seed

from .access import pool_or_404
from .models import Claim, WorkUnit
from .pools import PoolPlan, pool_plan
from .reports import (
    judging_summary,
    open_claims,
    pair_history,
    queries_progress,
    strata_progress,
    team_throughput,
    unit_items,
    work_units,
)
from .services import (
    JudgingError,
    current_pool,
    judging_policy_set,
    pool_build_create,
)
from .services_claims import claim_reassign, claim_release, policy_of

QUERIES_PER_PAGE = 50
MAX_DEPTH = 1000  # in the page; the command takes deeper pools


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


@dataclass(frozen=True)
class PoolRequest:
    """A new pool as the lead's form asks for it."""

    runs: list[Run]
    depth: int
    scope: str
    skip_missing: bool

    def plan(self, project: Project, seed: int) -> PoolPlan:
        return pool_plan(
            project=project,
            runs=self.runs,
            depth=self.depth,
            seed=seed,
            scope=self.scope,
            skip_missing=self.skip_missing,
        )


def _pool_request(request: HttpRequest, project: Project) -> PoolRequest:
    """The form's runs, depth and queries; raises PoolingError saying what to fix."""
    run_ids = {int(pk) for pk in request.POST.getlist("runs") if pk.isdigit()}
    runs = list(project.runs.filter(pk__in=run_ids).order_by("name"))
    depth = _int(request.POST.get("depth", "10"))
    scope = request.POST.get("scope", PoolScope.ALL)
    if not runs or len(runs) != len(run_ids) or not 1 <= depth <= MAX_DEPTH:
        raise PoolingError(f"Choose at least one run and a depth between 1 and {MAX_DEPTH}.")
    if scope not in PoolScope.values:
        raise PoolingError("Choose which queries to pool: all, or only those in no pool yet.")
    return PoolRequest(runs, depth, scope, request.POST.get("skip_missing") == "on")


def _int(raw: str, digits: int = 9) -> int:
    """A whole number typed or carried in a form, 0 for anything else (or longer)."""
    raw = raw.strip()
    return int(raw) if raw.isdigit() and len(raw) <= digits else 0


@login_required
@require_POST
def pool_preview(request: HttpRequest, slug: str) -> HttpResponse:
    """What the pool would add, before anything is built: the lead confirms on this page."""
    access = _get_project_for_lead(request, slug)
    project = access.project
    seed = new_seed()
    try:
        wanted = _pool_request(request, project)
        plan = wanted.plan(project, seed)
    except PoolingError as error:
        messages.error(request, str(error))
        return redirect("pool_detail", slug=slug)
    context = {
        "project": project,
        "plan": plan,
        "wanted": wanted,
        "seed": seed,
        "after": plan.previous.pk if plan.previous else "",
        "missing": plan.selection.missing[:10],
    }
    return render(request, "judging/pool_preview.html", context)


@login_required
@require_POST
def pool_create(request: HttpRequest, slug: str) -> HttpResponse:
    """The preview's "build" button: build the pool previewed and open it for judging, in the
    background (a job, whose state the pool page shows). The seed is the preview's, so the
    pool is the one shown; `after` lets the job refuse if another pool was built since."""
    access = _get_project_for_lead(request, slug)
    try:
        wanted = _pool_request(request, access.project)
    except PoolingError as error:
        messages.error(request, str(error))
        return redirect("pool_detail", slug=slug)
    seed = _int(request.POST.get("seed", ""), digits=18) or new_seed()
    after = _int(request.POST.get("after", "")) or None
    job = pool_build_create(
        project=access.project,
        run_ids=[run.pk for run in wanted.runs],
        depth=wanted.depth,
        seed=seed,
        scope=wanted.scope,
        skip_missing=wanted.skip_missing,
        after=after,
        # Confirmed on a preview: refused if another pool was built since. A post without one
        # (a script) builds on whatever is current, as the command does.
        check_after="after" in request.POST,
        user=request.user,  # type: ignore[arg-type]
    )
    try:
        job_enqueue(job)  # committed by now: views run in autocommit
    except QueueUnavailable as error:
        messages.error(request, str(error))
    else:
        messages.info(request, f"Building a depth-{wanted.depth} pool of {len(wanted.runs)} runs.")
    return redirect("pool_detail", slug=slug)


@login_required
def judging_overview(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    project = access.project
    pool = current_pool(project)
    context: dict[str, object] = {
        "project": project,
        "pool": pool,
        "policy": policy_of(project),
        "members": project.memberships.select_related("user").order_by("user__username"),
    }
    if pool is not None:
        summaries = judging_summary(pool=pool)
        page = Paginator(work_units(pool=pool).select_related("query"), QUERIES_PER_PAGE).get_page(
            request.GET.get("page")
        )
        context.update(
            summaries=summaries,
            team=team_throughput(summaries, pool),
            strata=strata_progress(pool=pool),
            claims=open_claims(pool=pool),
            page=page,
            queries=queries_progress(pool=pool, units=list(page.object_list)),
        )
    return render(request, "judging/lead_overview.html", context)


@login_required
def unit_detail(request: HttpRequest, slug: str, unit_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    pool = pool_or_404(access)
    unit = get_object_or_404(work_units(pool=pool).select_related("query"), pk=unit_id)
    context = {
        "project": access.project,
        "unit": unit,
        "claims": unit.claims.select_related("user").order_by("claimed_at"),
        "rows": unit_items(unit=unit),
    }
    return render(request, "judging/lead_unit.html", context)


@login_required
def pair_history_view(request: HttpRequest, slug: str, pair_id: int) -> HttpResponse:
    """Every answer ever given on a pair, in any pool, and the pools that selected it."""
    access = _get_project_for_lead(request, slug)
    pair = get_object_or_404(
        Pair.objects.select_related("query", "document"), pk=pair_id, query__project=access.project
    )
    units = WorkUnit.objects.filter(items__pair=pair, gold_for=None)
    unit = units.order_by("-pool_id").first()
    pools = pair.pool_items.select_related("pool").order_by("pool_id")
    context = {
        "project": access.project,
        "pair": pair,
        "unit": unit,
        "pools": pools,
        "rows": pair_history(pair=pair),
    }
    return render(request, "judging/lead_item.html", context)


def _username(request: HttpRequest, field: str) -> str:
    """A username typed or chosen in a form; "" (nobody) for one with a NUL character, which
    no account has and which PostgreSQL refuses even to compare."""
    name = request.POST.get(field, "").strip()
    return "" if "\x00" in name else name


def _claim_of(access: Access, claim_id: int) -> Claim:
    # A gold check is its annotator's alone: no lead releases or reassigns it.
    claims = Claim.objects.filter(unit__gold_for=None)
    return get_object_or_404(claims, pk=claim_id, pool__project=access.project)


@login_required
@require_POST
def claim_release_view(request: HttpRequest, slug: str, claim_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    claim = _claim_of(access, claim_id)
    try:
        claim_release(claim=claim)
        messages.info(request, f"Released {claim.user.username}'s claim on {claim.unit.query.qid}.")
    except JudgingError as error:
        messages.error(request, str(error))
    return redirect("judging_overview", slug=slug)


@login_required
@require_POST
def claim_reassign_view(request: HttpRequest, slug: str, claim_id: int) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    claim = _claim_of(access, claim_id)
    member = access.project.memberships.filter(user__username=_username(request, "to")).first()
    if member is None:
        messages.error(request, "Choose a member of this project to reassign the query to.")
        return redirect("judging_overview", slug=slug)
    try:
        moved = claim_reassign(claim=claim, to=member.user)
        messages.info(
            request, f"{claim.unit.query.qid} is now {moved.user.username}'s ({moved.state})."
        )
    except JudgingError as error:
        messages.error(request, str(error))
    return redirect("judging_overview", slug=slug)


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    """Give an account a role in the project; a username nobody has yet gets a new account,
    whose one-time sign-in link this answer shows (and nothing stores)."""
    access = _get_project_for_lead(request, slug)
    username = _username(request, "username")
    role = request.POST.get("role", Role.ANNOTATOR)
    if role not in Role.values:
        messages.error(request, f"No such role {role!r}: choose one of {', '.join(Role.values)}.")
        return redirect("judging_overview", slug=slug)
    user = User.objects.filter(username=username).first()
    if user is None:
        try:
            link = member_invite(project=access.project, username=username, role=Role(role))
        except AccountError as error:
            messages.error(request, str(error))
            return redirect("judging_overview", slug=slug)
        return _link_page(request, access, link, created=True)
    if not user.is_active:
        messages.error(request, f"The account {username!r} is deactivated; ask an administrator.")
    else:
        membership_set(project=access.project, user=user, role=Role(role))
        messages.info(request, f"{user.username} is now {_a(role)} of this project.")
    return redirect("judging_overview", slug=slug)


@login_required
@require_POST
def member_link(request: HttpRequest, slug: str, user_id: int) -> HttpResponse:
    """A new one-time sign-in link for a member who has never set a password (the earlier
    link stops working)."""
    access = _get_project_for_lead(request, slug)
    member = get_object_or_404(access.project.memberships.select_related("user"), user_id=user_id)
    refusal = signin_link_refusal(by=request.user, user=member.user)  # type: ignore[arg-type]
    if refusal:
        messages.error(request, refusal)
        return redirect("judging_overview", slug=slug)
    link = signin_link(user=member.user, project=access.project)
    return _link_page(request, access, link, created=False)


def _a(role: str) -> str:
    return f"an {role}" if role[:1] in "aeiou" else f"a {role}"


def _link_page(
    request: HttpRequest, access: Access, link: SignInLink, created: bool
) -> HttpResponse:
    """The link, in this answer only: not in a message (those are kept in the session or a
    cookie until shown), not in a redirect's address; every page is sent no-store."""
    context = {
        "project": access.project,
        "account": link.user,
        "role_article": _a(access.project.memberships.get(user=link.user).role),
        "link": request.build_absolute_uri(link.path),
        "expires_at": link.expires_at,
        "lifetime_seconds": settings.PASSWORD_RESET_TIMEOUT,
        "created": created,
    }
    return render(request, "annotation/member_link.html", context, status=201)


@login_required
@require_POST
def policy_save(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    try:
        minutes = int(request.POST.get("claim_idle_minutes", ""))
        share = float(request.POST.get("double_share_percent", "")) / 100
        judging_policy_set(project=access.project, claim_idle_minutes=minutes, double_share=share)
        messages.info(request, "Judging settings saved.")
    except (ValueError, JudgingError) as error:
        messages.error(request, f"Not saved: {error}")
    return redirect("judging_overview", slug=slug)
