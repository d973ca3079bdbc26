"""The LLM judge's prompt, its answer's reading and its version digest (pure functions)."""

from __future__ import annotations

import json

import pytest

from annotation.protocol import Anchor, Protocol, Ruling, from_content
from judging.llm_prompt import (
    DEFAULT_TEMPLATE,
    GRADE_SCHEMA,
    REASONING_PREAMBLE,
    PromptError,
    document_text,
    judge_digest,
    parse_answer,
    render_messages,
    template_check,
)
from tests.conftest import DATA
from tests.llm_project import PROTOCOL

WITH_ANCHOR = Protocol(
    intro=PROTOCOL.intro,
    grades=PROTOCOL.grades,
    anchors=(Anchor("cheap flights", "d9", 3, "lists fares.", title="Fares"),),
    rulings=(Ruling("A dead link?", "Grade 0."),),
)


def user_text(**options: object) -> str:
    arguments: dict[str, object] = {
        "template": "",
        "protocol": WITH_ANCHOR,
        "query": "cheap flights",
        "description": "fares from Berlin",
        "document": "Fares\nBerlin to Rome from 19 euros.",
        "reasoning": False,
    }
    arguments.update(options)
    messages = render_messages(**arguments)  # type: ignore[arg-type]
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_it_renders_the_protocol_then_the_query_and_the_document() -> None:
    text = user_text()
    order = [
        "3 = Perfectly relevant: answers the query on its own.",
        "0 = Irrelevant: nothing useful.",
        'Query "cheap flights", document "Fares": grade 3. lists fares.',
        "- A dead link? Grade 0.",
        "Query: cheap flights",
        "What the searcher wanted: fares from Berlin",
        "Document: Fares",
        "Berlin to Rome from 19 euros.",
    ]
    places = [text.index(part) for part in order]
    assert places == sorted(places)
    assert REASONING_PREAMBLE not in text


def test_it_adds_the_reasoning_preamble_after_the_document() -> None:
    text = user_text(reasoning=True)
    assert text.index("Split this problem into steps") > text.index("Document: Fares")


def test_it_follows_umbrelas_prompt() -> None:
    prompts = DATA / "llm-qrels" / "umbrela-gpt4o-arabzad" / "prompts.json"
    if not prompts.exists():
        pytest.skip(f"the published prompts are not at {prompts}")
    umbrela = json.loads(prompts.read_text())["32"]["graded"]["user"]
    for line in ("1. Consider the underlying intent of the search.", "(M)", "(T)", "(O)"):
        assert line in umbrela and line in REASONING_PREAMBLE
    assert "nothing to do with the query" in umbrela
    assert "Given a query and a" in DEFAULT_TEMPLATE and "integer scale of 0 to 3" in umbrela


def test_it_uses_the_text_of_a_protocol_without_grades() -> None:
    text = user_text(protocol=from_content({}, "Grade 3: answers it. Grade 0: unrelated."))
    assert "Grade 3: answers it. Grade 0: unrelated." in text


def test_it_renders_a_custom_template_with_dollar_placeholders() -> None:
    template = 'Q=$query D=${document} G=$grades {"json": "braces stay"} costs $$5'
    text = user_text(template=template)
    assert text.startswith("Q=cheap flights D=Fares\nBerlin")
    assert '{"json": "braces stay"} costs $5' in text


def test_it_names_an_unknown_placeholder() -> None:
    with pytest.raises(PromptError, match=r"Unknown placeholder \$passage"):
        template_check("$query $document $passage")
    with pytest.raises(PromptError, match=r"\$\$ for a dollar"):
        template_check("$query $document costs $ 5")
    with pytest.raises(PromptError, match=r"add \$document"):
        template_check("only $query")


def test_it_asks_for_a_strict_json_schema_of_grade_and_reason() -> None:
    assert GRADE_SCHEMA["type"] == "json_schema"
    spec = GRADE_SCHEMA["json_schema"]
    assert spec["strict"] is True
    schema = spec["schema"]
    assert schema["required"] == ["reason", "grade"] and schema["additionalProperties"] is False
    assert schema["properties"]["grade"] == {"type": "integer", "enum": [0, 1, 2, 3]}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (None, "empty"),
        ("", "empty"),
        ("   ", "empty"),
        ("The grade is 2.", "not JSON"),
        ('```json\n{"grade": 2, "reason": "x"}\n```', "not JSON"),
        ('{"grade": 2, "reason": "x"', "not JSON"),
        ("[2]", "not an object"),
        ("2", "not an object"),
        ('{"reason": "x"}', "no 'grade'"),
        ('{"grade": 2}', "no 'reason'"),
        ("{}", "no 'grade' and no 'reason'"),
        ('{"grade": 2.0, "reason": "x"}', "not an integer: 2.0"),
        ('{"grade": "2", "reason": "x"}', 'not an integer: "2"'),
        ('{"grade": true, "reason": "x"}', "not an integer: true"),
        ('{"grade": 4, "reason": "x"}', "outside 0-3"),
        ('{"grade": -1, "reason": "x"}', "outside 0-3"),
        ('{"grade": null, "reason": "x"}', "not an integer: null"),
        ('{"grade": 1, "reason": 7}', "reason is not a string"),
    ],
)
def test_it_fails_to_parse_anything_but_an_integer_grade_and_a_reason(
    text: str | None, error: str
) -> None:
    parsed = parse_answer(text)
    assert parsed.grade is None and not parsed.ok
    assert error in parsed.error


def test_it_parses_a_well_formed_answer() -> None:
    parsed = parse_answer(' {"reason": "answers it", "grade": 3} ')
    assert (parsed.grade, parsed.reason, parsed.error) == (3, "answers it", "")
    assert parse_answer('{"grade": 0, "reason": ""}').grade == 0


def test_it_cuts_a_long_document_at_a_word() -> None:
    assert document_text("T", "short text", limit=100) == "T\nshort text"
    assert document_text("", "one two three four", limit=9) == "one two [...]"
    assert document_text(" ", " x ") == "x"


def test_it_digests_canonical_json() -> None:
    a = judge_digest({"model": "m", "temperature": 0.0, "nested": {"b": 1, "a": 2}})
    b = judge_digest({"nested": {"a": 2, "b": 1}, "temperature": 0.0, "model": "m"})
    assert a == b and len(a) == 64
    assert judge_digest({"model": "m2", "temperature": 0.0, "nested": {"b": 1, "a": 2}}) != a
