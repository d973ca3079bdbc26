"""``manage.py agreement --a QRELS_A --b QRELS_B``: how well two judges agree, from files only.

A thin wrapper around :func:`agreement.report.agreement_report`: no database, no models, so it
runs in CI against two qrels files. ``--format json`` is a stable interface (see the README).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agreement.kappa import (
    DEFAULT_RESAMPLES,
    Kappa,
    landis_koch,
)
from agreement.report import (
    AgreementReport,
    agreement_report,
)
from assay import options as bounded
from formats.trec import FormatError, read_qrels


class Command(BaseCommand):
    help = (
        "Agreement of two judges on the (qid, docid) pairs both judged: raw and chance "
        "agreement, Cohen's kappa (graded, linear, quadratic, binary), Krippendorff's alpha, "
        "the confusion matrix (rows: --a), leniency, and percentile bootstrap intervals."
    )
    # Files in, report out: nothing here touches the database, so do not require one.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--a", required=True, metavar="QRELS_A", help="qrels of judge A")
        parser.add_argument("--b", required=True, metavar="QRELS_B", help="qrels of judge B")
        parser.add_argument(
            "--threshold",
            type=bounded.grade,
            default=1,
            help="grades >= this are relevant, for the binary kappa (default 1)",
        )
        parser.add_argument(
            "--format",
            choices=("text", "json"),
            default="text",
            help="text (default): the report for a person; json: the stable shape CI parses",
        )
        parser.add_argument(
            "--bootstrap",
            type=bounded.resamples,
            default=DEFAULT_RESAMPLES,
            metavar="N",
            help=f"bootstrap resamples, 0 for none (default {DEFAULT_RESAMPLES})",
        )
        parser.add_argument(
            "--unit",
            choices=("query", "pair"),
            default="query",
            help="what the bootstrap resamples: whole queries (default) or single pairs",
        )
        parser.add_argument(
            "--seed", type=bounded.seed, default=0, help="bootstrap seed (default 0)"
        )
        parser.add_argument(
            "--labels",
            help="the label set, e.g. 0,1,2,3 (default: every grade either judge used); "
            "it fixes the positions the weighted kappas weigh by",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        qrels = {}
        for side in ("a", "b"):
            try:
                qrels[side] = read_qrels(options[side])
            except (FormatError, OSError) as error:
                raise CommandError(str(error)) from error
        try:
            report = agreement_report(
                qrels["a"],
                qrels["b"],
                threshold=options["threshold"],
                bootstrap=options["bootstrap"],
                unit=options["unit"],
                seed=options["seed"],
                labels=_labels(options["labels"]),
            )
        except ValueError as error:
            raise CommandError(f"{options['a']} and {options['b']}: {error}") from error
        if options["format"] == "json":
            self.stdout.write(json.dumps(report.as_dict(), indent=2, allow_nan=False))
        else:
            self.stdout.write(render_text(report, options["a"], options["b"]))


def _labels(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(token) for token in text.split(",")]
    except ValueError:
        raise CommandError(f"--labels must be integers separated by commas, not {text!r}") from None


# --------------------------------------------------------------------------- text report


def _num(value: float | None, digits: int = 3) -> str:
    if value is None or value != value:  # NaN is the only value not equal to itself
        return "undefined"
    return f"{value:.{digits}f}"


def _with_ci(report: AgreementReport, name: str, value: float) -> str:
    ci = report.ci.get(name)
    interval = "" if ci is None else f" [{_num(ci[0])}, {_num(ci[1])}]"
    return f"{_num(value)}{interval}"


def _kappa_line(report: AgreementReport, name: str, kappa: Kappa) -> str:
    value = _with_ci(report, name, kappa.kappa)
    if kappa.kappa != kappa.kappa:  # NaN: no band to name, and "undefined" once is enough
        return value
    return f"{value}  {landis_koch(kappa.kappa)}"


def _confusion_table(report: AgreementReport) -> list[str]:
    width = max(6, *(len(str(v)) + 2 for row in report.confusion for v in row))
    header = " " * 8 + "".join(f"B={label}".rjust(width) for label in report.labels)
    rows = [
        f"  A={label}".ljust(8) + "".join(str(v).rjust(width) for v in row)
        for label, row in zip(report.labels, report.confusion, strict=True)
    ]
    return ["confusion matrix (rows: A, columns: B)", header, *rows]


def _recall_line(title: str, labels: tuple[int, ...], shares: tuple[float, ...]) -> str:
    cells = "  ".join(
        f"{label}: {_num(share)}" for label, share in zip(labels, shares, strict=True)
    )
    return f"{title}  {cells}"


def _row(label: str, value: str) -> str:
    return f"  {label.ljust(27)} {value}"


def _summary(report: AgreementReport) -> list[str]:
    binary = report.binary
    return [
        _row(
            "pairs judged by both",
            f"{report.n} over {report.queries} queries "
            f"(only in A: {report.only_a}, only in B: {report.only_b})",
        ),
        _row("raw agreement (p_o)", _with_ci(report, "observed", report.unweighted.observed)),
        _row("chance agreement (p_e)", _num(report.unweighted.expected)),
        _row("Cohen's kappa", f"{_kappa_line(report, 'kappa', report.unweighted)} (Landis-Koch)"),
        _row("kappa, linear weights", _kappa_line(report, "kappa_linear", report.linear)),
        _row("kappa, quadratic weights", _kappa_line(report, "kappa_quadratic", report.quadratic)),
        _row(
            f"binary kappa (grade >= {report.threshold})",
            f"{_kappa_line(report, 'kappa_binary', binary)}; raw agreement {_num(binary.observed)}",
        ),
        _row(
            "Krippendorff's alpha",
            f"ordinal {_with_ci(report, 'alpha_ordinal', report.alpha_ordinal)}; "
            f"nominal {_num(report.alpha_nominal)}; interval {_num(report.alpha_interval)}",
        ),
    ]


def _bootstrap_line(report: AgreementReport) -> str:
    settings = report.bootstrap
    if not settings.resamples:
        return "no bootstrap intervals (--bootstrap 0)"
    units = "queries" if settings.unit == "query" else "pairs"
    return (
        f"intervals in brackets: {settings.confidence:.0%} percentile bootstrap, "
        f"{settings.resamples} resamples of the {settings.units} {units}, seed {settings.seed}"
    )


def render_text(report: AgreementReport, a_path: str, b_path: str) -> str:
    """The human-readable report: the headline numbers first, then the detail behind them."""
    lenient = report.leniency
    lines = [
        f"agreement of A = {a_path} and B = {b_path}",
        *_summary(report),
        "",
        *_confusion_table(report),
        "",
        f"leniency: mean grade A {_num(lenient.mean_a)}, B {_num(lenient.mean_b)}; "
        f"A grades higher on {lenient.a_higher:.1%} of pairs, B on {lenient.b_higher:.1%}",
        _recall_line(
            "per-grade recall, B gives A's grade:", report.labels, report.recall.b_matches_a
        ),
        _recall_line(
            "per-grade recall, A gives B's grade:", report.labels, report.recall.a_matches_b
        ),
        _bootstrap_line(report),
        *(f"note: {note}" for note in report.notes),
    ]
    return "\n".join(lines)
