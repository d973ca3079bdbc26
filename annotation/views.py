"""The home page: the projects a person belongs to. (The project page shows judging progress
and so lives in judging: `judging.views_project`.)"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .access import projects_of


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "annotation/home.html", {"projects": projects_of(request)})
