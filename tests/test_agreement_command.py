"""``manage.py agreement``: files in, the stable JSON shape or a readable report out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sklearn_confusion

from agreement.kappa import (
    landis_koch,
)
from agreement.report import (
    TRAP_SENTENCE,
)

REPO = Path(__file__).resolve().parents[1]
CONTRACT_KEYS = {
    "n",
    "observed",
    "expected",
    "kappa",
    "kappa_linear",
    "kappa_quadratic",
    "kappa_binary",
    "threshold",
    "alpha_ordinal",
    "confusion",
    "labels",
    "ci",
}

# Two judges on 3 queries x 8 documents; B is a little more lenient than A.
A_GRADES = [0, 0, 1, 2, 3, 0, 1, 0, 0, 1, 1, 2, 3, 3, 0, 0, 2, 0, 0, 1, 2, 2, 0, 1]
B_GRADES = [0, 1, 1, 2, 3, 0, 2, 0, 1, 1, 2, 2, 2, 3, 0, 0, 3, 0, 0, 1, 1, 2, 1, 1]


def write_qrels(path: Path, grades: list[int], extra: tuple[str, ...] = ()) -> Path:
    lines = [f"q{i // 8} 0 d{i} {grade}" for i, grade in enumerate(grades)]
    path.write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    return path


def run(*args: str) -> str:
    out = StringIO()
    call_command("agreement", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    # A pair only one judge has must not count.
    a = write_qrels(tmp_path / "a.qrels", A_GRADES, extra=("q9 0 lonely 3",))
    b = write_qrels(tmp_path / "b.qrels", B_GRADES)
    return a, b


def test_it_prints_the_contract_json_with_reference_values(files: tuple[Path, Path]) -> None:
    a_path, b_path = files
    report = json.loads(run("--a", str(a_path), "--b", str(b_path), "--format", "json"))
    assert report.keys() >= CONTRACT_KEYS
    a, b = np.array(A_GRADES), np.array(B_GRADES)
    assert (report["n"], report["only_a"], report["only_b"]) == (24, 1, 0)
    assert report["labels"] == [0, 1, 2, 3]
    assert report["confusion"] == sklearn_confusion(a, b, labels=[0, 1, 2, 3]).tolist()
    assert report["observed"] == pytest.approx(float(np.mean(a == b)), abs=1e-12)
    for key, weights in (("kappa", None), ("kappa_linear", "linear")):
        assert report[key] == pytest.approx(cohen_kappa_score(a, b, weights=weights), abs=1e-9)
    assert report["kappa_quadratic"] == pytest.approx(
        cohen_kappa_score(a, b, weights="quadratic"), abs=1e-9
    )
    assert report["threshold"] == 1
    assert report["kappa_binary"] == pytest.approx(cohen_kappa_score(a >= 1, b >= 1), abs=1e-9)
    alpha = krippendorff.alpha(reliability_data=[a, b], level_of_measurement="ordinal")
    assert report["alpha_ordinal"] == pytest.approx(alpha, abs=1e-9)
    lo, hi = report["ci"]["kappa"]
    assert -1 <= lo <= hi <= 1
    assert report["bootstrap"] == {
        "resamples": 10_000,
        "unit": "query",
        "units": 3,
        "seed": 0,
        "confidence": 0.95,
        "method": "percentile",
    }


def test_it_honours_threshold_unit_seed_and_bootstrap(files: tuple[Path, Path]) -> None:
    a_path, b_path = files
    args = ["--a", str(a_path), "--b", str(b_path), "--format", "json", "--threshold", "2"]
    report = json.loads(run(*args, "--unit", "pair", "--bootstrap", "500", "--seed", "4"))
    a, b = np.array(A_GRADES), np.array(B_GRADES)
    assert report["threshold"] == 2
    assert report["kappa_binary"] == pytest.approx(cohen_kappa_score(a >= 2, b >= 2), abs=1e-9)
    assert report["binary_confusion"] == sklearn_confusion(a >= 2, b >= 2).tolist()
    assert (report["bootstrap"]["unit"], report["bootstrap"]["units"]) == ("pair", 24)
    assert report == json.loads(run(*args, "--unit", "pair", "--bootstrap", "500", "--seed", "4"))
    no_ci = json.loads(run(*args, "--bootstrap", "0"))
    assert no_ci["ci"]["kappa"] is None and no_ci["kappa"] == report["kappa"]


def test_it_pins_the_label_set_for_weighted_kappa(tmp_path: Path) -> None:
    a = write_qrels(tmp_path / "a", [0, 1, 3, 3, 0, 1, 3, 0])
    b = write_qrels(tmp_path / "b", [0, 3, 3, 1, 1, 1, 3, 0])
    args = ["--a", str(a), "--b", str(b), "--format", "json", "--bootstrap", "0"]
    union, scale = json.loads(run(*args)), json.loads(run(*args, "--labels", "0,1,2,3"))
    assert (union["labels"], scale["labels"]) == ([0, 1, 3], [0, 1, 2, 3])
    expected = cohen_kappa_score(
        [0, 1, 3, 3, 0, 1, 3, 0], [0, 3, 3, 1, 1, 1, 3, 0], weights="linear", labels=[0, 1, 2, 3]
    )
    assert scale["kappa_linear"] == pytest.approx(expected, abs=1e-9)
    with pytest.raises(CommandError, match="--labels must be integers"):
        run(*args, "--labels", "0,one")


def test_it_prints_a_text_report_with_the_band(files: tuple[Path, Path]) -> None:
    a_path, b_path = files
    text = run("--a", str(a_path), "--b", str(b_path), "--bootstrap", "200")
    a, b = np.array(A_GRADES), np.array(B_GRADES)
    kappa = cohen_kappa_score(a, b)
    assert landis_koch(kappa) == "moderate"
    assert f"Cohen's kappa               {kappa:.3f} [" in text
    assert "moderate (Landis-Koch)" in text
    for fragment in ("pairs judged by both", "24 over 3 queries", "confusion matrix", "leniency"):
        assert fragment in text
    assert "A=0" in text and "B=3" in text


def test_it_names_the_trap_in_the_text_report(tmp_path: Path) -> None:
    # The chapter's trap: 95 of 100 pairs agree, nearly all of them on "not relevant".
    a = [0] * 92 + [0] * 3 + [1] * 2 + [1] * 3
    b = [0] * 92 + [1] * 3 + [0] * 2 + [1] * 3
    text = run(
        "--a", str(write_qrels(tmp_path / "a", a)), "--b", str(write_qrels(tmp_path / "b", b))
    )
    assert "0.950" in text and "0.519" in text and "moderate" in text
    assert f"note: {TRAP_SENTENCE}" in text


def test_it_prints_null_when_kappa_is_undefined(tmp_path: Path) -> None:
    same = write_qrels(tmp_path / "same", [2] * 8)
    report = json.loads(run("--a", str(same), "--b", str(same), "--format", "json"))
    assert report["kappa"] is None and report["kappa_linear"] is None
    assert report["observed"] == 1.0 and report["expected"] == 1.0
    assert report["band"] == "undefined"
    text = run("--a", str(same), "--b", str(same))
    assert "undefined" in text and "p_e = 1" in text
    assert "undefined  undefined" not in text  # said once, not as a value and as its band


def test_it_says_when_the_files_share_no_pair(tmp_path: Path) -> None:
    a = write_qrels(tmp_path / "a", [1, 2])
    b = tmp_path / "b"
    b.write_text("q7 0 other 1\n", encoding="utf-8")
    with pytest.raises(CommandError, match="no \\(qid, docid\\) pair is judged in both"):
        run("--a", str(a), "--b", str(b))


def test_it_fails_on_a_malformed_file_naming_file_and_line(tmp_path: Path) -> None:
    good = write_qrels(tmp_path / "good.qrels", A_GRADES)
    bad = tmp_path / "bad.qrels"
    bad.write_text("q1 0 d1 1\nq1 0 d2 2\nq1 0 d3 high\n", encoding="utf-8")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "assay.settings.test"}
    result = subprocess.run(
        [sys.executable, "manage.py", "agreement", "--a", str(good), "--b", str(bad)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    error_lines = result.stderr.strip().splitlines()
    assert len(error_lines) == 1
    assert f"{bad}:3: grade 'high' is not an integer" in error_lines[0]


def test_it_fails_on_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"nowhere\.qrels"):
        run("--a", str(tmp_path / "nowhere.qrels"), "--b", str(tmp_path / "b"))
