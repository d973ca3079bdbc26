"""`GET /api/projects/<slug>/agreement/`: the `agreement` command's JSON for the project's
double-judged pairs, for leads (annotators 403, outsiders 404, as every other lead view)."""

from __future__ import annotations

import math
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import project_for_lead
from assay.api import ErrorOut

from .dashboard import BREAKDOWN_RESAMPLES, Row, agreement_dashboard, parse_filters


def _nullable_float() -> serializers.FloatField:
    return serializers.FloatField(allow_null=True)


class IntervalField(serializers.ListField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=serializers.FloatField(), min_length=2, max_length=2, allow_null=True, **kwargs
        )


class BreakdownOut(serializers.Serializer):
    n = serializers.IntegerField()
    kappa = _nullable_float()
    ci = IntervalField(help_text="95 % percentile bootstrap interval of kappa, 1,000 resamples")


class PairOut(BreakdownOut):
    a = serializers.CharField(help_text="the person whose grades are A (name sorts first)")
    b = serializers.CharField()


class AgreementOut(serializers.Serializer):
    """The `agreement --format json` keys, then what only a project has."""

    n = serializers.IntegerField()
    observed = _nullable_float()
    expected = _nullable_float()
    kappa = _nullable_float()
    kappa_linear = _nullable_float()
    kappa_quadratic = _nullable_float()
    kappa_binary = _nullable_float()
    threshold = serializers.IntegerField()
    alpha_nominal = _nullable_float()
    alpha_ordinal = _nullable_float()
    alpha_interval = _nullable_float()
    confusion = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()))
    labels = serializers.ListField(child=serializers.IntegerField())
    ci = serializers.DictField(child=IntervalField())
    band = serializers.CharField()
    band_binary = serializers.CharField()
    agreement = serializers.DictField(child=serializers.DictField(child=_nullable_float()))
    binary_confusion = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField())
    )
    leniency = serializers.DictField(child=serializers.FloatField())
    per_grade_recall = serializers.DictField(child=serializers.ListField(child=_nullable_float()))
    queries = serializers.IntegerField()
    only_a = serializers.IntegerField()
    only_b = serializers.IntegerField()
    bootstrap = serializers.DictField(child=serializers.JSONField())
    notes = serializers.ListField(child=serializers.CharField())
    pairs = PairOut(many=True, help_text="every two people who graded the same pairs")
    strata = serializers.DictField(child=BreakdownOut())
    unsure_or_skipped = serializers.IntegerField(
        help_text="unsure or skipped current answers in view, left out of every number"
    )
    prevalence = serializers.DictField(
        child=serializers.ListField(child=serializers.FloatField()),
        help_text="share of each label (in `labels` order) among A's grades, B's and both",
    )
    alpha_ordinal_all_raters = serializers.FloatField(
        allow_null=True,
        help_text="Krippendorff's ordinal alpha over every grader of every double-judged pair "
        "in view, when more than two people graded (else null)",
    )


_FILTERS = [
    OpenApiParameter("a", OpenApiTypes.STR, description="judge A's username (with b)"),
    OpenApiParameter("b", OpenApiTypes.STR, description="judge B's username (with a)"),
    OpenApiParameter("stratum", OpenApiTypes.STR, description="only this stratum's pairs"),
    OpenApiParameter(
        "protocol", OpenApiTypes.INT, description="only grades made under this version"
    ),
]


def _breakdown(row: Row) -> dict[str, Any]:
    kappa = None if math.isnan(row.kappa) else row.kappa
    return {"n": row.n, "kappa": kappa, "ci": list(row.ci) if row.ci else None}


class AgreementView(APIView):
    @extend_schema(
        parameters=_FILTERS,
        responses={200: AgreementOut, 400: ErrorOut},
        summary="Agreement on the project's double-judged pairs (leads only)",
        description=(
            "The JSON of `manage.py agreement --labels 0,1,2,3 --format json` for the "
            "project's double-judged pairs: first grader against second, or `a` against "
            "`b` on every pair both graded; 10,000 query resamples, seed 0. Then `pairs` "
            "(every two people), `strata`, `unsure_or_skipped`, `prevalence` and, with more "
            "than two raters, Krippendorff's ordinal alpha over all of them "
            "(`alpha_ordinal_all_raters`; `alpha_ordinal` stays the two judges' of the "
            f"headline). Breakdown intervals use {BREAKDOWN_RESAMPLES:,} resamples. 400 for "
            "a person who graded nothing in the project or a view with no pairs."
        ),
    )
    def get(self, request: Request, slug: str) -> Response:
        access = project_for_lead(request._request, slug)
        try:
            filters = parse_filters(request.query_params)
            dashboard = agreement_dashboard(
                project=access.project, filters=filters, pair_resamples=BREAKDOWN_RESAMPLES
            )
        except ValueError as error:
            return Response({"detail": str(error)}, status=status.HTTP_400_BAD_REQUEST)
        if dashboard.report is None:
            return Response(
                {"detail": "no double-judged pairs in this view: " + _why_empty(filters)},
                status=status.HTTP_400_BAD_REQUEST,
            )
        body = dashboard.report.as_dict()
        body["pairs"] = [
            {"a": a, "b": b, **_breakdown(row)}
            for row in dashboard.pairs
            for a, b in [row.label.split("|", 1)]
        ]
        body["strata"] = {row.label: _breakdown(row) for row in dashboard.strata}
        body["unsure_or_skipped"] = dashboard.unsure_or_skipped
        body["alpha_ordinal_all_raters"] = dashboard.alpha_all
        body["prevalence"] = dashboard.report.prevalence()
        return Response(AgreementOut(body).data)


def _why_empty(filters: Any) -> str:
    if filters.people:
        return f"{filters.a} and {filters.b} have not both graded any pair here"
    return (
        "no pair here was graded by two people; the judging policy's double-judged share "
        "sends that share of each stratum's queries to two annotators when a pool is built"
    )
