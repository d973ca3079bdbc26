"""The LLM judge through the API, for leads and CI jobs (annotators 403, outsiders 404):

- `GET  /api/projects/<slug>/judges/<name>/`: `llm_judge status --format json`;
- `GET  /api/projects/<slug>/judges/<name>/calibration/`: the latest calibration's report
  (`llm_judge calibrate --format json`), 404 before any;
- `POST /api/projects/<slug>/judges/<name>/label/`: start labelling (`mode` "label" or
  "prefilter"); 409 with the reason when the version's gate has not passed — the same service
  as the page's button and the command, so the gate holds everywhere.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import project_for_lead
from assay.api import ErrorOut
from jobs.errors import QueueUnavailable
from judging.models import LLMJudge
from judging.services_llm import GateRefused, JudgeError, llm_label_start

from .judge_status import judge_status
from .services_calibration import CalibrationError, calibration_report, judge_version_of


def _judge(request: Request, slug: str, name: str) -> LLMJudge:
    access = project_for_lead(request._request, slug)
    return get_object_or_404(LLMJudge, project=access.project, name=name)


class LabelIn(serializers.Serializer):
    mode = serializers.ChoiceField(choices=["label", "prefilter"], default="label")
    limit = serializers.IntegerField(min_value=1, max_value=100_000_000, required=False)


class LabelOut(serializers.Serializer):
    job = serializers.IntegerField(help_text="the job's id; its state is on the judge's page")
    state = serializers.CharField()
    mode = serializers.CharField()
    version = serializers.CharField()


class JudgeStatusView(APIView):
    @extend_schema(
        responses={200: serializers.JSONField, 400: ErrorOut},
        summary="A judge's version, gate, last calibration, counts and cost (leads only)",
    )
    def get(self, request: Request, slug: str, name: str) -> Response:
        judge = _judge(request, slug, name)
        try:
            return Response(judge_status(judge))
        except CalibrationError as error:  # an external judge with nothing imported yet
            return Response({"detail": str(error)}, status=status.HTTP_400_BAD_REQUEST)


class JudgeCalibrationView(APIView):
    @extend_schema(
        responses={200: serializers.JSONField, 404: ErrorOut},
        summary="The latest calibration report of the judge's current version (leads only)",
    )
    def get(self, request: Request, slug: str, name: str) -> Response:
        judge = _judge(request, slug, name)
        try:
            report = calibration_report(version=judge_version_of(judge=judge))
        except CalibrationError as error:
            return Response({"detail": str(error)}, status=status.HTTP_404_NOT_FOUND)
        if report is None:
            detail = f"judge {name!r}'s current version has no calibration yet"
            return Response({"detail": detail}, status=status.HTTP_404_NOT_FOUND)
        return Response(report)


class JudgeLabelView(APIView):
    @extend_schema(
        request=LabelIn,
        responses={202: LabelOut, 400: ErrorOut, 409: ErrorOut, 503: ErrorOut},
        summary="Start labelling with the judge (leads only); 409 unless its gate passed",
        description=(
            "`mode` label labels every pair outside the human-only slice and is refused (409, "
            "nothing called) unless the current version's latest calibration passed; prefilter "
            "is allowed below the bar. `limit`: only the first N pairs of the scope."
        ),
    )
    def post(self, request: Request, slug: str, name: str) -> Response:
        given = LabelIn(data=request.data)  # a malformed body is a 400 before anything else
        judge = _judge(request, slug, name)
        given.is_valid(raise_exception=True)
        mode, limit = given.validated_data["mode"], given.validated_data.get("limit")
        try:
            user = request.user if isinstance(request.user, User) else None
            job = llm_label_start(judge=judge, mode=mode, limit=limit, user=user)
        except GateRefused as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        except JudgeError as error:
            return Response({"detail": str(error)}, status=status.HTTP_400_BAD_REQUEST)
        except QueueUnavailable:
            detail = "the task queue is unreachable; nothing was started, try again"
            return Response({"detail": detail}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        job.refresh_from_db()
        version = job.params["version_id"]
        digest = judge.versions.get(pk=version).digest
        body = {"job": job.pk, "state": job.state, "mode": mode, "version": digest}
        return Response(LabelOut(body).data, status=status.HTTP_202_ACCEPTED)
