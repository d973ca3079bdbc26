"""``manage.py llm_judge add|calibrate|label|status SLUG NAME ...``: the LLM judge.

Exit codes are part of the contract: 0 done (``calibrate``: the gate passed), 3 refused by the
gate (``calibrate``: the version failed a condition; ``label``: the version has no passed
calibration, and the endpoint was not called), 1 an error (the message says what to do).
``--format json`` shapes are stable (see the README's "LLM judge" section).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.cli import project_by_slug
from annotation.models import Project
from assay import options as bounded
from jobs.models import Job, JobState
from jobs.run import job_run_inline
from judging.models import JudgeKind, JudgeVersion, LLMJudge
from judging.services_llm import (
    GateRefused,
    JudgeError,
    gate_passed,
    judge_add,
    judge_version_current,
    latest_calibration,
    llm_label_start,
)

from ...judge_status import judge_status
from ...services_calibration import CalibrationError, calibration_start, judge_version_of

REFUSED = 3
LABEL_KEYS = ("labelled", "calls", "parse_failures", "failed", "skipped_existing")
FORMATS = ("text", "json")


class Command(BaseCommand):
    help = (
        "The LLM judge: add one (an OpenAI-compatible endpoint), calibrate it against the "
        "humans' grades (exit 0 passed, 3 refused), label the project's pairs (only after a "
        "passed calibration, or with --prefilter), and show its status."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        add = actions.add_parser("add", help="add a judge (an OpenAI-compatible endpoint)")
        _names(add)
        add.add_argument("--base-url", required=True, metavar="URL")
        add.add_argument("--model", required=True)
        add.add_argument(
            "--api-key-env",
            default="",
            metavar="VAR",
            help="environment variable holding the API key (never stored)",
        )
        add.add_argument("--concurrency", type=bounded.whole_number(1, 256), default=8)
        add.add_argument("--timeout", type=bounded.real_number(0.001, 3600), default=60.0)
        add.add_argument("--max-retries", type=bounded.whole_number(0, 10), default=4)
        add.add_argument("--prompt", metavar="FILE", help="a prompt template file")
        for side in ("input", "output"):
            add.add_argument(
                f"--price-{side}",
                type=bounded.real_number(0, 1e6),
                metavar="PRICE",
                help=f"price per million {side} tokens, for the cost per 1,000 judgments",
            )
        calibrate = actions.add_parser("calibrate", help="calibrate against the humans")
        _names(calibrate)
        _format(calibrate)
        label = actions.add_parser("label", help="label the project's pairs")
        _names(label)
        label.add_argument("--limit", type=bounded.whole_number(1, 10**9), metavar="N")
        label.add_argument(
            "--prefilter",
            action="store_true",
            help="pre-filter mode: allowed without a passed calibration",
        )
        _format(label)
        status = actions.add_parser("status", help="version, gate, last calibration, counts")
        _names(status)
        _format(status)

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_by_slug(options["project"])
        action = options["action"]
        if action == "add":
            self._add(project, options)
            return
        judge = _judge(project, options["name"])
        handler = {"calibrate": self._calibrate, "label": self._label, "status": self._status}
        handler[action](judge, options)

    # ----------------------------------------------------------------------- actions

    def _add(self, project: Project, options: dict[str, Any]) -> None:

        template = ""
        if options["prompt"]:
            try:
                template = Path(options["prompt"]).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise CommandError(f"{options['prompt']}: {error}") from error
        try:
            judge = judge_add(
                project=project,
                name=options["name"],
                base_url=options["base_url"],
                model=options["model"],
                api_key_env=options["api_key_env"],
                concurrency=options["concurrency"],
                timeout=options["timeout"],
                max_retries=options["max_retries"],
                prompt_template=template,
                price_input=options["price_input"],
                price_output=options["price_output"],
            )
        except JudgeError as error:
            raise CommandError(str(error)) from error
        version = judge_version_current(judge=judge)
        self.stdout.write(
            f"judge {judge.name!r} added to {project.slug!r}: {judge.model} at {judge.base_url}, "
            f"version {version.short} (not calibrated: run `llm_judge calibrate "
            f"{project.slug} {judge.name}`)"
        )

    def _calibrate(self, judge: LLMJudge, options: dict[str, Any]) -> None:
        try:
            job = calibration_start(judge=judge)
        except CalibrationError as error:
            raise CommandError(str(error)) from error
        _finish(job)
        version = judge_version_of(judge=judge)
        calibration = latest_calibration(version=version)
        if calibration is None:  # the job ended without storing one: never silently pass
            raise CommandError("the calibration stored no report")
        report = calibration.report
        if options["format"] == "json":
            self.stdout.write(json.dumps(report, indent=2, sort_keys=True))
        else:
            self.stdout.write(calibration_text(report))
        if not calibration.passed:
            raise SystemExit(REFUSED)

    def _label(self, judge: LLMJudge, options: dict[str, Any]) -> None:
        version = judge_version_of(judge=judge)
        prefilter = options["prefilter"]
        if not prefilter and not gate_passed(version=version):
            self._refuse(judge, version, options["format"])
        if judge.kind == JudgeKind.EXTERNAL:
            raise CommandError(
                f"judge {judge.name!r} is external: its labels are imported with "
                "`import_judgments`, there is no endpoint to call"
            )

        try:
            job = llm_label_start(
                judge=judge, mode="prefilter" if prefilter else "label", limit=options["limit"]
            )
        except GateRefused:
            self._refuse(judge, version, options["format"])
        except JudgeError as error:
            raise CommandError(str(error)) from error
        result = _finish(job)
        counts = {key: int(result.get(key, 0)) for key in LABEL_KEYS}
        shown = {
            "judge": judge.name,
            "version": version.digest,
            "mode": job.params.get("mode"),
            **result,
            **counts,
        }
        shown.pop("summary", None)
        if options["format"] == "json":
            self.stdout.write(json.dumps(shown, indent=2, sort_keys=True))
        else:
            self.stdout.write(
                f"{judge.name} @{version.short}: {counts['labelled']} labelled in "
                f"{counts['calls']} calls, {counts['parse_failures']} parse failures, "
                f"{counts['failed']} failed, {counts['skipped_existing']} already labelled"
            )

    def _refuse(self, judge: LLMJudge, version: JudgeVersion, format: str) -> None:
        latest = latest_calibration(version=version)
        why = (
            "it has no calibration"
            if latest is None
            else "its latest calibration was refused (" + ", ".join(latest.reasons) + ")"
        )
        message = (
            f"judge {judge.name!r} version {version.short} may not label at scale: {why}. "
            f"Calibrate it (`llm_judge calibrate {judge.project.slug} {judge.name}`) or use "
            "--prefilter; the endpoint was not called"
        )
        if format == "json":
            refused = {
                "judge": judge.name,
                "version": version.digest,
                "refused": message,
                **dict.fromkeys(LABEL_KEYS, 0),
            }
            self.stdout.write(json.dumps(refused, indent=2, sort_keys=True))
        self.stderr.write(message)
        raise SystemExit(REFUSED)

    def _status(self, judge: LLMJudge, options: dict[str, Any]) -> None:
        status = judge_status(judge)
        if options["format"] == "json":
            self.stdout.write(json.dumps(status, indent=2, sort_keys=True))
        else:
            self.stdout.write(status_text(status))


# --------------------------------------------------------------------------- helpers


def _names(parser: CommandParser) -> None:
    parser.add_argument("project", metavar="SLUG")
    parser.add_argument("name", metavar="NAME")


def _format(parser: CommandParser) -> None:
    parser.add_argument("--format", choices=FORMATS, default="text")


def _judge(project: Project, name: str) -> LLMJudge:
    try:
        return LLMJudge.objects.get(project=project, name=name)
    except LLMJudge.DoesNotExist:
        raise CommandError(
            f"project {project.slug!r} has no judge {name!r}; add one with `llm_judge add "
            f"{project.slug} {name} --base-url URL --model MODEL` or import labels with "
            f"`import_judgments {project.slug} FILE --as {name} --kind llm`"
        ) from None


def _finish(job: Job) -> dict[str, Any]:
    """Run the job here to its end; its result, or CommandError with its error."""
    job_run_inline(job.pk)
    job.refresh_from_db()
    if job.state != JobState.DONE:
        raise CommandError(job.error or job.message or f"the job ended {job.state}")
    return dict(job.result or {})


def _fmt(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def calibration_text(report: dict[str, Any]) -> str:
    """The calibration report for a person."""
    verdict = "PASSED" if report["passed"] else "REFUSED (" + ", ".join(report["reasons"]) + ")"
    lenient = report["leniency"]
    lines = [
        f"judge {report['judge']} @{report['version'][:10]}: {verdict}",
        f"calibrated pairs: {report['n']} ({report['graded']} graded by the judge)",
        f"kappa vs each human: {_fmt(report['kappa'])} (linear {_fmt(report['kappa_linear'])}, "
        f"quadratic {_fmt(report['kappa_quadratic'])}, binary at {report['threshold']} "
        f"{_fmt(report['kappa_binary'])})",
        f"kappa vs consensus: {_fmt(report['consensus']['kappa'])}; "
        f"humans' own kappa: {_fmt(report['human_kappa'])}",
        f"leniency: mean difference {_fmt(lenient['mean_diff'])}, positive rate "
        f"{_fmt(lenient['positive_rate_llm'])} vs {_fmt(lenient['positive_rate_human'])} "
        f"(ratio {_fmt(lenient['ratio'])})",
        f"recall of the relevant class: {_fmt(report['recall'])}; per grade: "
        + ", ".join(f"{g}: {_fmt(r)}" for g, r in report["per_grade_recall"].items()),
        f"parse failures: {_fmt(report['parse_failures'])}; retest kappa: "
        f"{_fmt(report['retest'])}; tau of system rankings: {_fmt(report['tau'])}",
        "conditions:",
    ]
    for c in report["conditions"]:
        mark = "ok  " if c["passed"] else "FAIL"
        mark = mark if c["measured"] or not c["passed"] else "n/a "
        lines.append(f"  {mark} {c['code']}: {c['label']}: {_fmt(c['value'])} ({c['bound']})")
    return "\n".join(lines)


def status_text(status: dict[str, Any]) -> str:
    counts = status["counts"]
    lines = [
        f"judge {status['judge']} ({status['kind']}) @{status['version'][:10]}: {status['gate']}",
        f"labelled {counts['labelled']} of {counts['pairs']} pairs: {counts['ok']} graded, "
        f"{counts['parse_failure']} parse failures, {counts['failed']} failed; "
        f"{counts['retest']} retest calls, {counts['screened']} screened out",
    ]
    if (c := status["calibration"]) is not None:
        verdict = "passed" if c["passed"] else "refused (" + ", ".join(c["reasons"]) + ")"
        lines.append(
            f"last calibration {c['at']}: {c['n']} pairs, kappa {_fmt(c['kappa'])}, humans "
            f"{_fmt(c['human_kappa'])}, tau {_fmt(c['tau'])}: {verdict}"
        )
    if status["cost"]:
        lines.append("cost: " + ", ".join(f"{k} {v}" for k, v in status["cost"].items()))
    return "\n".join(lines)
