"""The annotator's API: their queue, the next item, submitting an answer, acknowledging a new
protocol version. The same rules as the pages: 404 for non-members, only one's own claims, and
nothing about other judges, systems, ranks or scores."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import User
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import Access, project_for_member
from annotation.services_protocol import protocol_ack
from assay.api import ErrorOut

from .access import pool_or_404
from .models import Judgment, Kind
from .services import (
    MAX_NOTE,
    Answer,
    JudgingError,
    NoSuchItem,
    NotYours,
    ProtocolChange,
    ProtocolChanged,
    Screen,
    claim_active,
    finished_count,
    judgment_submit,
    protocol_gate,
    screen_for,
    unit_state,
)


def _access(request: Request, slug: str) -> Access:
    # DRF puts the authenticated user (session or token) on the wrapped Django request too.
    return project_for_member(request._request, slug)


def _user(request: Request) -> User:
    assert isinstance(request.user, User)  # IsAuthenticated is the default permission
    return request.user


class QueryOut(serializers.Serializer):
    qid = serializers.CharField()
    text = serializers.CharField()


class DocumentOut(serializers.Serializer):
    docid = serializers.CharField()
    title = serializers.CharField()
    text = serializers.CharField()


class ItemOut(serializers.Serializer):
    id = serializers.IntegerField()
    query = QueryOut()
    document = DocumentOut()


class ChangeOut(serializers.Serializer):
    seen = serializers.IntegerField(allow_null=True, help_text="last version you judged under")
    current = serializers.IntegerField()
    diff = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))


class ActiveOut(serializers.Serializer):
    query = QueryOut()
    done = serializers.IntegerField()
    total = serializers.IntegerField()


class QueueOut(serializers.Serializer):
    protocol = serializers.IntegerField(allow_null=True)
    protocol_change = ChangeOut(allow_null=True)
    active = ActiveOut(allow_null=True, help_text="the query you hold, if any")
    finished_queries = serializers.IntegerField()


class NextOut(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=["item", "acknowledge", "done", "none"],
        help_text="none: you hold no query (GET only; POST claims one)",
    )
    item = ItemOut(allow_null=True)
    idempotency_key = serializers.UUIDField(help_text="send it with your answer to this item")
    done_in_query = serializers.IntegerField()
    total_in_query = serializers.IntegerField()
    finished_queries = serializers.IntegerField()
    protocol = serializers.IntegerField(allow_null=True)
    protocol_change = ChangeOut(allow_null=True)


class JudgmentIn(serializers.Serializer):
    item = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=Kind.values, default=Kind.GRADE)
    grade = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=3)
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=MAX_NOTE)
    seconds_spent = serializers.FloatField(required=False, default=0.0, min_value=0)
    idempotency_key = serializers.UUIDField()


class JudgmentOut(serializers.Serializer):
    id = serializers.IntegerField()
    item = serializers.IntegerField()
    kind = serializers.CharField()
    grade = serializers.IntegerField(allow_null=True)
    note = serializers.CharField()
    protocol = serializers.IntegerField(allow_null=True, help_text="protocol version number")
    seconds_spent = serializers.FloatField()
    created_at = serializers.DateTimeField()
    created = serializers.BooleanField(help_text="false: this key was already stored")


class AckIn(serializers.Serializer):
    version = serializers.IntegerField()


def _change(change: ProtocolChange | None) -> dict[str, Any] | None:
    if change is None:
        return None
    return {
        "seen": change.seen.number if change.seen else None,
        "current": change.current.number,
        "diff": [{"kind": line.kind, "text": line.text} for line in change.lines],
    }


def _item(screen: Screen) -> dict[str, Any] | None:
    item = screen.item
    if item is None:
        return None
    return {
        "id": item.pk,
        "query": {"qid": item.qid, "text": item.query_text},
        "document": {"docid": item.docid, "title": item.title, "text": item.text},
    }


def _judgment(judgment: Judgment, created: bool) -> dict[str, Any]:
    protocol = judgment.protocol
    return {
        "id": judgment.pk,
        "item": judgment.pair_id,
        "kind": judgment.kind,
        "grade": judgment.grade,
        "note": judgment.note,
        "protocol": protocol.number if protocol else None,
        "seconds_spent": judgment.seconds_spent,
        "created_at": judgment.created_at,
        "created": created,
    }


class QueueView(APIView):
    @extend_schema(responses=QueueOut, summary="Your queue: the query you hold and your progress")
    def get(self, request: Request, slug: str) -> Response:
        access = _access(request, slug)
        pool, user = pool_or_404(access), _user(request)
        protocol, change = protocol_gate(project=access.project, user=user)
        claim = claim_active(pool=pool, user=user)
        active, state = None, None
        if claim is not None:
            state = unit_state(claim=claim)
            query = claim.unit.query
            active = {
                "query": {"qid": query.qid, "text": query.text},
                "done": state.done,
                "total": state.total,
            }
        data = {
            "protocol": protocol.number if protocol else None,
            "protocol_change": _change(change),
            "active": active,
            "finished_queries": state.finished
            if state
            else finished_count(pool_id=pool.pk, user_id=user.pk),
        }
        return Response(QueueOut(data).data)


def _next(screen: Screen) -> dict[str, Any]:
    if screen.change:
        state = "acknowledge"
    elif screen.item:
        state = "item"
    else:
        state = "none" if screen.unclaimed else "done"
    return {
        "state": state,
        "item": _item(screen),
        "idempotency_key": uuid.uuid4(),
        "done_in_query": screen.done_in_query,
        "total_in_query": screen.total_in_query,
        "finished_queries": screen.finished_queries,
        "protocol": screen.protocol.number if screen.protocol else None,
        "protocol_change": _change(screen.change),
    }


class NextView(APIView):
    """GET (and HEAD) only read; POST claims. A GET that claimed would let a prefetching
    proxy, a link preview or a crawler with a session take queries nobody then judges."""

    @extend_schema(
        responses=NextOut,
        summary="The item you hold, read only (state `none` when you hold no query)",
        description=(
            "Never claims anything: the next item of the query you hold, `acknowledge` when a "
            "new protocol version must be read first, or `none` when you hold no query with "
            "an item left. POST to the same URL to claim one."
        ),
    )
    def get(self, request: Request, slug: str) -> Response:
        access = _access(request, slug)
        screen = screen_for(pool=pool_or_404(access), user=_user(request), take=False)
        return Response(NextOut(_next(screen)).data)

    @extend_schema(
        request=None,
        responses=NextOut,
        summary="Claim your next query when needed and return its next item",
        description=(
            "Answers as GET does, after claiming: the next item of the query you hold, or of "
            "a newly claimed query when you hold none or have finished yours; `done` when "
            "nothing is left for you. Repeating it claims nothing more while you hold a query."
        ),
    )
    def post(self, request: Request, slug: str) -> Response:
        access = _access(request, slug)
        screen = screen_for(pool=pool_or_404(access), user=_user(request))
        return Response(NextOut(_next(screen)).data)


class JudgmentCreateView(APIView):
    @extend_schema(
        request=JudgmentIn,
        responses={
            201: JudgmentOut,
            200: JudgmentOut,
            400: ErrorOut,
            404: ErrorOut,
            409: ErrorOut,
        },
        summary="Answer an item of the query you hold (grade, unsure, skip or undo)",
        description=(
            "Idempotent by `idempotency_key`: sending the same key again for the same item "
            "stores nothing and returns the stored judgment with 200. 409 when the key was "
            "already used for another answer (another item, or an undo), when the item is not "
            "in the query you hold or when a new protocol version must be acknowledged first."
        ),
    )
    def post(self, request: Request, slug: str) -> Response:
        access = _access(request, slug)
        pool, user = pool_or_404(access), _user(request)
        form = JudgmentIn(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            answer = Answer.parse(
                data["kind"], data.get("grade"), data["note"], data["seconds_spent"]
            )
            done = judgment_submit(
                pool=pool,
                user=user,
                item_id=data["item"],
                answer=answer,
                key=data["idempotency_key"],
            )
        except NoSuchItem as error:
            return Response({"detail": str(error)}, status=status.HTTP_404_NOT_FOUND)
        except (NotYours, ProtocolChanged) as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        except JudgingError as error:
            return Response({"detail": str(error)}, status=status.HTTP_400_BAD_REQUEST)
        code = status.HTTP_201_CREATED if done.created else status.HTTP_200_OK
        return Response(JudgmentOut(_judgment(done.judgment, done.created)).data, status=code)


class ProtocolAckView(APIView):
    @extend_schema(
        request=AckIn,
        responses={200: AckIn, 404: ErrorOut},
        summary="Acknowledge a protocol version after reading what changed",
    )
    def post(self, request: Request, slug: str) -> Response:
        access = _access(request, slug)
        form = AckIn(data=request.data)
        form.is_valid(raise_exception=True)
        version = get_object_or_404(access.project.protocols, number=form.validated_data["version"])
        protocol_ack(version=version, user=_user(request))
        return Response({"version": version.number})
