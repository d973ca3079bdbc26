"""Sample size from a pilot: the arithmetic against scipy (statsmodels when installed), the
`sample_size` command on files and on a release, and the comparison page's form."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy.stats import norm

from evaluation.comparison import DEFAULT_EFFECT, sample_size
from evaluation.stats import min_detectable_difference, queries_needed
from tests.compare_world import Compared, compared_world
from tests.conftest import World

CASES = [(0.02, 0.15, 0.05, 0.8), (0.05, 0.3, 0.01, 0.9), (0.01, 0.08, 0.05, 0.5)]


def z_test_power(delta: float, sd: float, n: int, alpha: float) -> float:
    """Power of the two-sided z test of a mean paired difference, both tails."""
    shift = delta * math.sqrt(n) / sd
    z = norm.ppf(1 - alpha / 2)
    return float(norm.cdf(shift - z) + norm.cdf(-shift - z))


@pytest.mark.parametrize(("delta", "sd", "alpha", "power"), CASES)
def test_it_needs_the_fewest_queries_that_reach_the_power(
    delta: float, sd: float, alpha: float, power: float
) -> None:
    n = queries_needed(delta, sd, alpha=alpha, power=power)
    by_hand = math.ceil(((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * sd / delta) ** 2)
    assert n == by_hand
    assert z_test_power(delta, sd, n, alpha) >= power
    # One query fewer falls short (the far tail adds less than the rounding takes away).
    assert z_test_power(delta, sd, n - 1, alpha) < power + 1e-3


@pytest.mark.parametrize(("delta", "sd", "alpha", "power"), CASES)
def test_it_detects_what_scipy_says_n_queries_detect(
    delta: float, sd: float, alpha: float, power: float
) -> None:
    mdd = min_detectable_difference(400, sd, alpha=alpha, power=power)
    assert mdd == pytest.approx(
        (norm.ppf(1 - alpha / 2) + norm.ppf(power)) * sd / math.sqrt(400), rel=1e-12
    )


@pytest.mark.parametrize(("delta", "sd", "alpha", "power"), CASES)
def test_it_agrees_with_statsmodels(delta: float, sd: float, alpha: float, power: float) -> None:
    power_module = pytest.importorskip("statsmodels.stats.power")
    nobs = power_module.NormalIndPower().solve_power(
        effect_size=delta / sd, alpha=alpha, power=power, ratio=0, alternative="two-sided"
    )
    # statsmodels counts the far tail too, so its n can be a fraction lower.
    assert abs(queries_needed(delta, sd, alpha=alpha, power=power) - math.ceil(nobs)) <= 1


def test_it_takes_the_effect_from_the_pilot_unless_given() -> None:
    rng = np.random.default_rng(0)
    d = rng.normal(0.03, 0.2, size=200)
    observed = sample_size(d)
    assert observed.effect_from == "observed"
    assert observed.effect == pytest.approx(abs(float(d.mean())))
    assert observed.queries_needed == queries_needed(observed.effect, float(d.std(ddof=1)))
    given = sample_size(d, effect=0.05, power=0.9, alpha=0.01)
    assert (given.effect, given.effect_from) == (0.05, "given")
    assert given.queries_needed == queries_needed(0.05, float(d.std(ddof=1)), alpha=0.01, power=0.9)
    flat = np.array([0.1, -0.1, 0.1, -0.1])
    assert sample_size(flat).effect == DEFAULT_EFFECT
    with pytest.raises(ValueError, match="spread is 0"):
        sample_size([0.0, 0.0, 0.0])


# ---------------------------------------------------------------------------------------------
# The command and the page
# ---------------------------------------------------------------------------------------------


def command(*args: str) -> str:
    out = io.StringIO()
    call_command("sample_size", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def compared(world: World, tmp_path: Path) -> Compared:
    return compared_world(world.project, tmp_path)


def runs(compared: Compared) -> list[str]:
    return [
        "--baseline",
        str(compared.run_paths["base"]),
        "--candidate",
        str(compared.run_paths["cand"]),
    ]


@pytest.mark.django_db
def test_it_prints_the_same_on_files_and_on_the_release(compared: Compared) -> None:
    on_files = json.loads(
        command("--qrels", str(compared.qrels_path), *runs(compared), "--format", "json")
    )
    on_release = json.loads(command("--release", "acme@1", *runs(compared), "--format", "json"))
    assert on_files == on_release
    assert on_files["pilot_queries"] == 40
    assert on_files["effect_from"] == "observed"
    assert on_files["queries_needed"] == queries_needed(
        abs(on_files["observed_mean_diff"]), on_files["sd_diff"]
    )
    text = command("--qrels", str(compared.qrels_path), *runs(compared), "--effect", "0.02")
    needed = queries_needed(0.02, on_files["sd_diff"])
    assert f"needed     {needed} queries" in text
    assert "0.0200 (given)" in text


@pytest.mark.django_db
def test_it_refuses_a_pilot_of_one_run_twice(compared: Compared) -> None:
    same = [
        "--baseline",
        str(compared.run_paths["base"]),
        "--candidate",
        str(compared.run_paths["same"]),
    ]
    with pytest.raises(CommandError, match="spread is 0"):
        command("--qrels", str(compared.qrels_path), *same)


@pytest.mark.django_db
def test_it_gives_the_commands_number_on_the_comparison_page(
    compared: Compared, world: World
) -> None:
    expected = json.loads(
        command(
            "--qrels",
            str(compared.qrels_path),
            *runs(compared),
            "--effect",
            "0.03",
            "--power",
            "0.9",
            "--format",
            "json",
        )
    )
    response = world.client_for(world.lead).get(
        "/p/acme/releases/1/compare/",
        {"baseline": "r-base", "candidate": "r-cand", "effect": "0.03", "power": "0.9"},
    )
    assert response.status_code == 200
    shown = response.context["sample"]["result"].as_dict()
    assert shown == {k: v for k, v in expected.items() if k not in ("metric", "contract")}
    assert f'id="queries-needed">{expected["queries_needed"]}<' in response.content.decode()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--power", "1.5", "--power: must be"),
        ("--alpha", "0", "--alpha: must be"),
        ("--effect", "nan", "--effect: must be"),
    ],
)
def test_it_refuses_an_option_out_of_bounds(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    run = tmp_path / "r.run"
    run.write_text("q1 Q0 d1 1 1.0 a\n")
    with pytest.raises(CommandError, match=message):
        command("--qrels", str(run), "--baseline", str(run), "--candidate", str(run), option, value)
