"""The protocol's life: a lead edits a draft, publishes it as an immutable version, annotators
acknowledge what changed. Published versions are never edited: there is no service for it."""

from __future__ import annotations

from dataclasses import replace

from django.contrib.auth.models import User
from django.db import transaction

from . import protocol as core
from .models import Project, ProtocolAck, ProtocolDraft, ProtocolVersion
from .services import protocol_publish


class ProtocolError(ValueError):
    """A draft that cannot be published; `problems` lists what to fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(" ".join(problems))
        self.problems = problems


def structure_of(version: ProtocolVersion) -> core.Protocol:
    return core.from_content(version.content or {})


def draft_structure(draft: ProtocolDraft) -> core.Protocol:
    return core.from_content(draft.content or {}, intro=draft.text)


def protocol_draft_of(project: Project) -> core.Protocol:
    """The lead's working copy, or the current version when nobody has started one."""
    draft = ProtocolDraft.objects.filter(project=project).first()
    if draft is not None:
        return draft_structure(draft)
    current = project.current_protocol()
    if current is None:
        return core.Protocol()
    structured = structure_of(current)
    # A text-only version becomes the introduction of the first structured draft.
    return structured if structured.is_structured else core.Protocol(intro=current.text)


@transaction.atomic
def protocol_draft_save(*, project: Project, user: User, draft: core.Protocol) -> ProtocolDraft:
    """Store the draft as the lead left it; anchors get their documents' titles."""
    draft = _with_titles(project, draft)
    content = core.to_content(draft)
    intro = content.pop("intro")
    saved, _ = ProtocolDraft.objects.update_or_create(
        project=project, defaults={"text": intro, "content": content, "updated_by": user}
    )
    return saved


@transaction.atomic
def protocol_draft_publish(*, project: Project, user: User) -> ProtocolVersion:
    """Publish the draft as the next version and discard the draft.

    Raises ProtocolError, publishing nothing, when the draft is incomplete.
    """
    draft = ProtocolDraft.objects.select_for_update().filter(project=project).first()
    if draft is None:
        raise ProtocolError(["There is no draft to publish: edit the protocol first."])
    structure = _with_titles(project, draft_structure(draft))
    docids = {a.docid for a in structure.anchors}
    known = set(project.documents.filter(docid__in=docids).values_list("docid", flat=True))
    problems = core.problems(structure, known)
    if problems:
        raise ProtocolError(problems)
    version = protocol_publish(
        project=project,
        text=core.render_markdown(structure),
        content=core.to_content(structure),
        user=user,
    )
    draft.delete()
    return version


@transaction.atomic
def protocol_ack(*, version: ProtocolVersion, user: User) -> ProtocolAck:
    """Record that `user` has read what changed in `version` (once; repeating is harmless)."""
    ack, _ = ProtocolAck.objects.get_or_create(version=version, user=user)
    return ack


def protocol_diff(*, old: ProtocolVersion | None, new: ProtocolVersion) -> list[core.DiffLine]:
    return core.diff(old.text if old else "", new.text)


def _with_titles(project: Project, draft: core.Protocol) -> core.Protocol:
    docids = {a.docid for a in draft.anchors}
    titles = dict(project.documents.filter(docid__in=docids).values_list("docid", "title"))
    anchors = tuple(replace(a, title=titles.get(a.docid, "")) for a in draft.anchors)
    return replace(draft, anchors=anchors)
