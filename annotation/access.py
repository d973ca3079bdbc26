"""Who may see what. Every project view starts with one of these helpers.

A user who is not a member of a project gets 404 for every URL of it, so that the existence of
a project is not disclosed to outsiders. A member without the lead role gets 403 on lead pages.
Superusers act as leads everywhere (they administer the instance anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest

from .models import Membership, Project, Role


@dataclass(frozen=True)
class Access:
    project: Project
    role: Role

    @property
    def is_lead(self) -> bool:
        return self.role == Role.LEAD


NO_SUCH_PROJECT = "no such project"


def project_for_member(request: HttpRequest, slug: str) -> Access:
    # One message for a project that does not exist and one the user is not a member of: the
    # API returns it as the 404's detail, and two messages would tell outsiders which exists.
    user = request.user
    if not user.is_authenticated:
        raise Http404(NO_SUCH_PROJECT)
    # One read in the ordinary case: the person's membership with its project (a join, which
    # the ORM builds in about half the time of the project with a subquery for the role; every
    # request of the judging loop starts here).
    rows = Membership.objects.select_related("project").filter(project__slug=slug, user=user)
    membership = next(iter(rows[:1]), None)
    if user.is_superuser:  # a lead everywhere, member or not
        project = membership.project if membership else Project.objects.filter(slug=slug).first()
        if project is None:
            raise Http404(NO_SUCH_PROJECT)
        return Access(project, Role.LEAD)
    if membership is None:
        raise Http404(NO_SUCH_PROJECT)
    return Access(membership.project, Role(membership.role))


def project_for_lead(request: HttpRequest, slug: str) -> Access:
    access = project_for_member(request, slug)
    if not access.is_lead:
        raise PermissionDenied("this page is for the project's leads")
    return access


def projects_of(request: HttpRequest) -> list[Access]:
    user = request.user
    if not user.is_authenticated:
        return []
    if user.is_superuser:
        return [Access(p, Role.LEAD) for p in Project.objects.all()]
    memberships = Membership.objects.filter(user=user).select_related("project")
    return [Access(m.project, Role(m.role)) for m in memberships.order_by("project__name")]


def may_create_projects(request: HttpRequest) -> bool:
    """Superusers and the leads of any project: the people who already run a golden set. An
    annotator-only account cannot start projects (and become their lead) on its own."""
    user = request.user
    if not user.is_authenticated:
        return False
    return user.is_superuser or Membership.objects.filter(user=user, role=Role.LEAD).exists()
