"""`POST /api/projects/<slug>/releases/<number>/compare/`: the regression gate for a CI job.

The job sends its candidate's run file and names a baseline run archived in the project; the
answer is `compare --format json` on the release's qrels (the baseline's stored scores, the
candidate scored under the same contract, the project's must-never-break list) plus the exit
code `compare` would give. The verdict is in the body: 200 whatever it is (leads only).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import project_for_lead
from assay import options as bounded
from assay.api import ErrorOut
from formats.trec import FormatError
from pooling.models import Run

from .comparison import report_json, single_metric
from .models import Release
from .services_compare import CompareError, comparison_of_file


class CompareIn(serializers.Serializer):
    run = serializers.FileField(help_text="the candidate's TREC run (qid Q0 docid rank score tag)")
    baseline = serializers.CharField(max_length=200, help_text="the name of a run in the project")
    metric = serializers.CharField(max_length=40, default="ndcg@10")
    bootstrap = serializers.IntegerField(
        min_value=0, max_value=bounded.MAX_RESAMPLES, default=10_000
    )
    seed = serializers.IntegerField(min_value=0, max_value=bounded.SEED_LIMIT - 1, default=0)


class CompareOut(serializers.Serializer):
    """`compare --format json`, then the exit code."""

    metric = serializers.CharField()
    n = serializers.IntegerField()
    mean_diff = serializers.FloatField()
    ci = serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2)
    ci_method = serializers.CharField()
    wins = serializers.IntegerField()
    losses = serializers.IntegerField()
    ties = serializers.IntegerField()
    verdict = serializers.ChoiceField(choices=["regression", "improvement", "inconclusive"])
    worst_query = serializers.DictField(allow_null=True)
    must_never_break_violations = serializers.ListField(child=serializers.DictField())
    secondary = serializers.DictField(child=serializers.DictField())
    statistics = serializers.DictField()
    contract = serializers.DictField()
    missing_from_run = serializers.DictField(child=serializers.IntegerField())
    exit_code = serializers.IntegerField(
        help_text="1 on a significant regression or a must-never-break violation, else 0"
    )


class CompareView(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        request={"multipart/form-data": CompareIn},
        responses={200: CompareOut, 400: ErrorOut},
        summary="Gate a candidate run file against a release (leads only)",
        description=(
            "The candidate (`run`, a TREC run file) is scored against the release's qrels under "
            "the contract its stored scores use and compared with `baseline`, a run archived "
            "in the project and scored under the release. The body is `compare --format json` "
            "plus `exit_code`; the answer is 200 whatever the verdict. 400 names the run "
            "file's line when it is not a TREC run, or what is missing."
        ),
    )
    def post(self, request: Request, slug: str, number: int) -> Response:
        given = CompareIn(data=request.data)  # a malformed body is a 400 before anything else
        access = project_for_lead(request._request, slug)
        release = Release.objects.filter(project=access.project, number=number).first()
        if release is None:
            raise Http404(f"project {slug!r} has no release {number}")
        given.is_valid(raise_exception=True)
        data = given.validated_data
        baseline = Run.objects.filter(project=access.project, name=data["baseline"]).first()
        if baseline is None:
            return _bad(f"baseline: project {slug!r} has no run named {data['baseline']!r}")
        try:
            metric = single_metric(data["metric"])
            with tempfile.NamedTemporaryFile(suffix=".run") as kept:
                for chunk in data["run"].chunks():
                    kept.write(chunk)
                kept.flush()
                result = comparison_of_file(
                    release=release,
                    baseline=baseline,
                    path=kept.name,
                    shown=Path(data["run"].name or "run").name,
                    metric=metric,
                    bootstrap=data["bootstrap"],
                    seed=data["seed"],
                )
        except (FormatError, CompareError, ValueError) as error:
            return _bad(str(error))
        body = report_json(result.report, result.baseline, result.candidate, result.contract)
        return Response(body | {"exit_code": result.report.exit_code})


def _bad(detail: str) -> Response:
    return Response({"detail": detail}, status=status.HTTP_400_BAD_REQUEST)
