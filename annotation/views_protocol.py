"""Protocol pages: every member reads the versions and their diffs; leads edit the draft and
publish it. A published version has no edit page: it can only be superseded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render

from . import protocol as core
from .access import Access, project_for_lead, project_for_member
from .services_protocol import (
    ProtocolError,
    protocol_diff,
    protocol_draft_of,
    protocol_draft_publish,
    protocol_draft_save,
    structure_of,
)

BLANK_ROWS = 2  # empty rows offered under each section of the draft form


def _get_project_for_member(request: HttpRequest, slug: str) -> Access:
    return project_for_member(request, slug)


def _get_project_for_lead(request: HttpRequest, slug: str) -> Access:
    return project_for_lead(request, slug)


@login_required
def protocol_detail(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_member(request, slug)
    versions = list(access.project.protocols.order_by("-number"))
    number = request.GET.get("v", "")
    shown = next(
        (v for v in versions if str(v.number) == number), versions[0] if versions else None
    )
    context = {
        "access": access,
        "project": access.project,
        "versions": versions,
        "protocol": shown,
        "structure": structure_of(shown) if shown else None,
    }
    return render(request, "annotation/protocol_detail.html", context)


@login_required
def protocol_diff_view(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_member(request, slug)
    protocols = access.project.protocols
    new = get_object_or_404(protocols, number=_int(request.GET.get("to"), 0))
    old = protocols.filter(number=_int(request.GET.get("from"), new.number - 1)).first()
    context = {
        "project": access.project,
        "old": old,
        "new": new,
        "lines": protocol_diff(old=old, new=new),
    }
    return render(request, "annotation/protocol_diff.html", context)


@login_required
def protocol_edit(request: HttpRequest, slug: str) -> HttpResponse:
    access = _get_project_for_lead(request, slug)
    project = access.project
    if request.method != "POST":
        return _edit_page(request, access, protocol_draft_of(project), [])
    form = parse_draft(request.POST)
    if form.errors:
        return _edit_page(request, access, form.protocol, form.errors, status=400)
    assert isinstance(request.user, User)
    protocol_draft_save(project=project, user=request.user, draft=form.protocol)
    if request.POST.get("action") != "publish":
        messages.info(request, "Draft saved. Annotators see it only once you publish it.")
        return redirect("protocol_edit", slug=slug)
    try:
        version = protocol_draft_publish(project=project, user=request.user)
    except ProtocolError as error:
        return _edit_page(request, access, form.protocol, error.problems, status=400)
    messages.info(request, f"Published version {version.number}. Annotators will see what changed.")
    return redirect("protocol_detail", slug=slug)


def _edit_page(
    request: HttpRequest,
    access: Access,
    draft: core.Protocol,
    errors: list[str],
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {
        "project": access.project,
        "draft": draft,
        "errors": errors,
        "current": access.project.current_protocol(),
        "blank": range(BLANK_ROWS),
        "grade_values": core.GRADE_VALUES,
    }
    return render(request, "annotation/protocol_edit.html", context, status=status)


@dataclass(frozen=True)
class DraftForm:
    protocol: core.Protocol
    errors: list[str]


def parse_draft(post: QueryDict) -> DraftForm:
    """Read the draft form's repeated rows; a row left entirely empty is dropped."""
    errors: list[str] = []
    if any("\x00" in value for _, values in post.lists() for value in values):
        # PostgreSQL cannot store it: refused with the form shown again, without them.
        errors.append("The draft contained NUL characters; they have been removed.")
        post = _without_nul(post)
    grades = [
        core.GradeDef(_number(v, f"Grade row {n}", errors), label.strip(), definition.strip())
        for n, (v, label, definition) in enumerate(
            _rows(post, "grade_value", "grade_label", "grade_definition"), start=1
        )
    ]
    anchor_rows = _rows(
        post, "anchor_query", "anchor_docid", "anchor_grade", "anchor_why", "anchor_excerpt"
    )
    anchors = [
        core.Anchor(
            query.strip(),
            docid.strip(),
            _number(g, f"Anchor {n}", errors),
            why.strip(),
            excerpt=excerpt.strip(),
        )
        # The excerpt is carried in a hidden field: a row whose visible fields are all
        # emptied is removed, excerpt and all.
        for n, (query, docid, g, why, excerpt) in enumerate(
            (row for row in anchor_rows if any(cell.strip() for cell in row[:4])), start=1
        )
    ]
    rulings = [
        core.Ruling(question.strip(), ruling.strip())
        for question, ruling in _rows(post, "ruling_question", "ruling_text")
    ]
    protocol = core.Protocol(
        intro=post.get("intro", "").replace("\r\n", "\n"),
        grades=tuple(grades),
        anchors=tuple(anchors),
        rulings=tuple(rulings),
    )
    return DraftForm(protocol, errors)


def _without_nul(post: QueryDict) -> QueryDict:
    clean = QueryDict(mutable=True)
    for name, values in post.lists():
        clean.setlist(name, [value.replace("\x00", "") for value in values])
    return clean


def _rows(post: QueryDict, *names: str) -> list[tuple[str, ...]]:
    columns = [post.getlist(name) for name in names]
    length = max((len(c) for c in columns), default=0)
    rows = [tuple(c[i] if i < len(c) else "" for c in columns) for i in range(length)]
    return [row for row in rows if any(cell.strip() for cell in row)]


def _number(raw: str, where: str, errors: list[str]) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        errors.append(f"{where}: the grade must be a number from 0 to 3.")
        return -1


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default
