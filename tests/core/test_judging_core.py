"""Pure cores of judging and the protocol: highlighting, double selection, pairing, diffs."""

from __future__ import annotations

import re

import pytest

from annotation import protocol as core
from judging import highlight as highlight_module
from judging.assignment import Candidate, double_count, draw_double, pick
from judging.highlight import (
    MAX_TERMS,
    MAX_TEXT_CHARS,
    MAX_TITLE_CHARS,
    highlight,
    query_terms,
    shown_document,
    term_pattern,
)


def test_it_escapes_before_marking_terms() -> None:
    html = highlight('<script>alert("x")</script>', term_pattern(["script"]))
    assert html == "&lt;<mark>script</mark>&gt;alert(&quot;x&quot;)&lt;/<mark>script</mark>&gt;"
    assert "<script" not in html


def test_it_never_breaks_an_entity() -> None:
    assert highlight("Tom & Amp", term_pattern(["amp"])) == "Tom &amp; <mark>Amp</mark>"
    assert highlight("a < b", term_pattern(["lt"])) == "a &lt; b"


def test_it_marks_words_starting_with_a_term_case_blind() -> None:
    assert highlight("Webhooks retry", term_pattern(["webhook"])) == "<mark>Webhooks</mark> retry"
    assert highlight("unwebhook", term_pattern(["webhook"])) == "unwebhook"
    assert highlight("x (y)", term_pattern(["(y"])) == "x (y)"  # terms are literal, not patterns


def test_it_picks_query_terms_without_stopwords() -> None:
    assert query_terms("How do I reset my Password?") == ["password", "reset"]
    assert query_terms("QM-2043") == ["2043", "qm"]
    assert highlight("plain text", term_pattern([])) == "plain text"


def test_it_marks_at_most_the_first_distinct_terms_of_a_long_query() -> None:
    words = [f"w{i:04d}" for i in range(5000)]
    terms = query_terms(" ".join(words + words))
    assert sorted(terms) == words[:MAX_TERMS]
    pattern = term_pattern(terms)
    assert pattern is not None and pattern.pattern.count("|") == MAX_TERMS - 1


def test_it_bounds_what_a_huge_query_on_a_huge_document_costs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 5,000 distinct words in the query, a 1 MB document made of them: the alternation holds
    # MAX_TERMS terms, compiled once for the title and the text, and only MAX_TEXT_CHARS
    # characters are escaped and marked, so the output is bounded whatever the input.
    words = [f"w{i:04d}" for i in range(5000)]
    text = " ".join(words * 40)[:1_000_000]
    compiled: list[re.Pattern[str] | None] = []

    def counting(terms: list[str]) -> re.Pattern[str] | None:
        compiled.append(term_pattern(terms))
        return compiled[-1]

    monkeypatch.setattr(highlight_module, "term_pattern", counting)
    shown = shown_document(" ".join(words), "w0001 " * 1000, text)
    assert len(compiled) == 1
    assert (shown.text_shown, shown.text_length, shown.truncated) == (
        MAX_TEXT_CHARS,
        1_000_000,
        True,
    )
    marks = shown.text.count("<mark>")
    assert 0 < marks <= MAX_TEXT_CHARS // 6  # only the first 50 words' occurrences are marked
    assert len(shown.text) <= MAX_TEXT_CHARS + marks * len("<mark></mark>")
    assert len(shown.title) <= MAX_TITLE_CHARS + shown.title.count("<mark>") * 13


def test_it_rounds_the_double_share_half_up() -> None:
    assert [double_count(n, 0.2) for n in (0, 1, 2, 3, 5, 10, 13)] == [0, 0, 0, 1, 1, 2, 3]
    assert double_count(4, 1.0) == 4
    with pytest.raises(ValueError):
        double_count(4, 1.5)


def choose_double(strata: dict[str, list[int]], share: float, seed: int) -> set[int]:
    """round(share x n) of each stratum's n ids, as a first pool draws them."""
    wanted = {stratum: double_count(len(members), share) for stratum, members in strata.items()}
    return draw_double(strata, wanted, seed)


def test_it_chooses_doubles_per_stratum_reproducibly() -> None:
    strata = {"head": list(range(10)), "tail": list(range(10, 30))}
    chosen = choose_double(strata, 0.2, seed=3)
    assert len(chosen & set(range(10))) == 2 and len(chosen - set(range(10))) == 4
    assert (
        choose_double({"tail": list(reversed(strata["tail"])), "head": strata["head"]}, 0.2, 3)
        == chosen
    )
    assert choose_double(strata, 0.2, seed=4) != chosen


def test_it_draws_no_more_than_a_stratum_holds() -> None:
    assert draw_double({"head": [1, 2]}, {"head": 5, "tail": 3}, seed=1) == {1, 2}


def test_it_prefers_the_least_paired_first_judge() -> None:
    candidates = [
        Candidate(1, 1, (10,)),  # held by someone paired twice with us
        Candidate(2, 2, ()),  # nobody yet
        Candidate(3, 3, (11,)),  # held by someone never paired with us
    ]
    assert [c.unit_id for c in pick(candidates, {10: 2})] == [2, 3, 1]
    assert [c.unit_id for c in pick(candidates, {})] == [1, 2, 3]


def sample() -> core.Protocol:
    return core.Protocol(
        intro="# Task\n\nJudge the need.",
        grades=tuple(core.GradeDef(v, f"L{v}", f"def {v}") for v in (0, 1, 2, 3)),
        anchors=(core.Anchor("q", "d1", 3, "because", "Doc one"),),
        rulings=(core.Ruling("Old pages?", "1 at most."),),
    )


def test_it_renders_a_protocol_as_one_markdown_document() -> None:
    text = core.render_markdown(sample())
    assert text.startswith("# Task")
    assert "- **3, L3**: def 3\n- **2, L2**: def 2" in text  # highest grade first
    assert '- **3**: "q" → *Doc one* (`d1`). because' in text
    assert "## Edge cases\n\n- **Old pages?** 1 at most." in text


def test_it_round_trips_through_json_content() -> None:
    assert core.from_content(core.to_content(sample())) == sample()


def test_it_lists_what_stops_publication() -> None:
    assert core.problems(sample(), {"d1"}) == []
    broken = core.Protocol(
        grades=(core.GradeDef(3, "", "x"),),
        anchors=(core.Anchor("q", "zz", 5, ""),),
        rulings=(core.Ruling("", "r"),),
    )
    found = core.problems(broken, {"d1"})
    assert len(found) == 6


def test_it_diffs_two_versions_line_by_line() -> None:
    lines = core.diff("a\nb\nc\n", "a\nB\nc\nd\n")
    assert [(line.kind, line.text) for line in lines] == [
        ("same", "a"),
        ("removed", "b"),
        ("added", "B"),
        ("same", "c"),
        ("added", "d"),
    ]
    assert core.diff("same\n", "same\n") == []
