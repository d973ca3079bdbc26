"""The command contracts (docs/contracts.md), checked through the commands themselves.

Each test here drives a command as a user does (``call_command`` or ``manage.py`` in a
subprocess) on a few lines written to a temporary directory, or on the real TREC DL 2019 files.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command, load_command_class
from django.core.management.base import CommandError

from sampling.models import QueryLog
from tests.conftest import World
from tests.test_sampling_web import make_log

REPO = Path(__file__).resolve().parents[1]
DL19 = REPO.parent / "shared" / "data" / "trec-dl-2019-passage"

QRELS = "q1 0 d1 3\nq1 0 d2 1\nq1 0 d3 0\nq2 0 d4 2\nq2 0 d5 0\nq3 0 d6 0\n"
RUN_A = "q1 Q0 d1 1 3 A\nq1 Q0 d3 2 2 A\nq1 Q0 d2 3 1 A\nq2 Q0 d5 1 2 A\nq2 Q0 d4 2 1 A\n"
RUN_B = "q1 Q0 d2 1 3 B\nq1 Q0 d1 2 2 B\nq2 Q0 d4 1 2 B\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {}
    for name, text in (("qrels", QRELS), ("a", RUN_A), ("b", RUN_B)):
        path = tmp_path / f"{name}.txt"
        path.write_text(text)
        paths[name] = str(path)
    return paths


def run(command: str, *args: str) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def help_text(app: str, command: str) -> str:
    return load_command_class(app, command).create_parser("manage.py", command).format_help()


# --------------------------------------------------------------------------- compare


def compare_args(files: dict[str, str], *extra: str) -> list[str]:
    return ["--qrels", files["qrels"], "--baseline", files["a"], "--candidate", files["b"], *extra]


def test_it_refuses_more_than_one_metric_to_compare_on(files: dict[str, str]) -> None:
    # The verdict is on one measure; a list used to be cut to its first name without a word.
    with pytest.raises(CommandError, match="--metric takes one measure, not 2"):
        run("compare", *compare_args(files, "--metric", "ndcg@10,map"))


def test_it_refuses_a_negative_bootstrap_count_to_compare(files: dict[str, str]) -> None:
    # --bootstrap 0 is the documented normal interval; -1 silently became it.
    with pytest.raises(CommandError, match="--bootstrap: must be from 0 to 1,000,000, not -1"):
        run("compare", *compare_args(files, "--bootstrap", "-1"))


@pytest.mark.parametrize("command", ["compare", "agreement"])
def test_it_names_the_seed_option_when_it_is_negative(files: dict[str, str], command: str) -> None:
    args = (
        compare_args(files)
        if command == "compare"
        else ["--a", files["qrels"], "--b", files["qrels"]]
    )
    with pytest.raises(CommandError, match=r"--seed: must be from 0 to 9,223,372,[0-9,]+, not -1"):
        run(command, *args, "--seed", "-1")


def test_its_help_states_every_compare_default() -> None:
    text = " ".join(help_text("evaluation", "compare").split())
    for default in ("(default ndcg@10)", "(default 10000)", "(default 0)", "(default 1)"):
        assert default in text
    assert "exponential, default" in text and "(skip, default)" in text
    assert "text (default)" in text and "below rank 3" in text


def test_its_help_states_the_agreement_defaults() -> None:
    text = " ".join(help_text("agreement", "agreement").split())
    assert "binary kappa (default 1)" in text and "text (default)" in text


# --------------------------------------------------------------------------- evaluate


def test_it_refuses_a_run_given_twice_to_evaluate(files: dict[str, str]) -> None:
    # The run's path names it in every format: a second copy used to vanish from the output.
    with pytest.raises(CommandError, match="is given twice"):
        run("evaluate", "--qrels", files["qrels"], "--run", files["a"], "--run", files["a"])


# --------------------------------------------------------------------------- import_log


@pytest.mark.django_db
@pytest.mark.parametrize("flag", ["--accept", "--weighted"])
def test_it_refuses_a_sample_flag_without_a_quota(world: World, tmp_path: Path, flag: str) -> None:
    # Without --quota nothing is drawn, so --accept used to add no query, silently.
    path = tmp_path / "log.csv"
    path.write_bytes(make_log())
    with pytest.raises(CommandError, match=f"{flag} needs --quota"):
        run("import_log", world.project.slug, str(path), flag)
    assert not QueryLog.objects.exists()


# --------------------------------------------------------------------------- real data

needs_dl19 = pytest.mark.skipif(
    not DL19.exists(), reason="real TREC DL 2019 data (../shared/data) not present"
)
DL19_QRELS = str(DL19 / "qrels.dl19-passage.txt")
BM25, BERT = (
    str(DL19 / "runs" / f"{name}.judged-topics.run.gz") for name in ("UNH_bm25", "p_bert")
)


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="assay.settings.test")
    command = [sys.executable, "manage.py", *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)


@pytest.mark.data
@needs_dl19
def test_evaluate_keeps_its_json_shape_on_trec_dl_2019() -> None:
    evaluated = manage("evaluate", "--qrels", DL19_QRELS, "--run", BM25, "--format", "json")
    assert evaluated.returncode == 0, evaluated.stderr
    document = json.loads(evaluated.stdout)
    assert document["contract"]["gain"] == "exponential"
    assert document["contract"]["rel_threshold"] == 1 and document["contract"]["empty"] == "skip"
    scores = document["runs"][BM25]
    assert set(scores["mean"]) == {"ndcg@10", "recall@100", "mrr", "map", "p@10", "hit@5"}
    assert len(scores["per_query"]) == 43
    assert scores["queries"] == {"scored": 43, "skipped_no_relevant": 0, "missing_from_run": 0}
    twice = manage("evaluate", "--qrels", DL19_QRELS, "--run", BM25, "--run", BM25)
    assert twice.returncode == 1 and "is given twice" in twice.stderr and not twice.stdout


@pytest.mark.data
@needs_dl19
def test_compare_gates_on_one_metric_on_trec_dl_2019() -> None:
    args = ("compare", "--qrels", DL19_QRELS, "--baseline", BERT, "--candidate", BM25)
    compared = manage(*args, "--format", "json", "--bootstrap", "1000")
    assert compared.returncode == 1, compared.stderr  # BM25 against BERT: a regression
    verdict = json.loads(compared.stdout)
    assert verdict["verdict"] == "regression" and verdict["n"] == 43
    assert verdict["wins"] + verdict["losses"] + verdict["ties"] == 43
    listed = manage(*args, "--metric", "ndcg@10,map")
    assert listed.returncode == 1 and "--metric takes one measure" in listed.stderr
