"""The home page (the projects a person belongs to) and the New project page. (The project
page shows judging progress and so lives in judging: `judging.views_project`.)"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from .access import may_create_projects, projects_of
from .services import ProjectError, project_start

PROJECT_FIELDS = ("slug", "name", "description")


@login_required
def home(request: HttpRequest) -> HttpResponse:
    context = {"projects": projects_of(request), "may_create": may_create_projects(request)}
    return render(request, "annotation/home.html", context)


@login_required
def project_new(request: HttpRequest) -> HttpResponse:
    """Create a project; its creator becomes its lead and lands on its Data page, which says
    what to do next (corpus, queries, protocol, runs, annotators)."""
    if not may_create_projects(request):
        raise PermissionDenied("only the leads of a project and administrators create projects")
    fields = dict.fromkeys(PROJECT_FIELDS, "")
    problems: dict[str, str] = {}
    if request.method == "POST":
        fields = {name: request.POST.get(name, "").strip() for name in PROJECT_FIELDS}
        assert isinstance(request.user, User)  # login_required
        try:
            project = project_start(**fields, lead=request.user)
        except ProjectError as error:
            problems = error.problems
        else:
            messages.success(request, f"Project {project.name} created; you are its lead.")
            return redirect("project_data", slug=project.slug)
    context = {"fields": fields, "problems": problems}
    return render(request, "annotation/project_new.html", context, status=400 if problems else 200)
