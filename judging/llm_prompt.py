"""The LLM judge's prompt and the reading of its answer: no Django here.

The prompt is rendered from the project's protocol version: the grade definitions, the anchor
examples and the edge-case rulings, then the query (with its description) and the document.
The default template follows UMBRELA's (Upadhyay et al., 2024: the prompt that reproduced TREC
assessors' labels best with GPT-4o), with the protocol's own words in place of UMBRELA's fixed
grade definitions; `REASONING_PREAMBLE` adds UMBRELA's step-by-step instructions.

A custom template is a `string.Template`: ``$name`` or ``${name}`` placeholders, ``$$`` for a
dollar sign. `string.Template` rather than ``str.format`` because prompts are full of JSON
examples whose braces ``str.format`` would take for placeholders. The placeholders are
`PLACEHOLDERS`; an unknown one is refused by name (`PromptError`), never left in the prompt.

The answer is requested as structured output (`GRADE_SCHEMA`) and must be a JSON object with an
integer ``grade`` 0-3 and a string ``reason``; anything else is a parse failure whose error says
what was wrong. A failure is stored as missing: a grade is never guessed from prose.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from annotation.protocol import Protocol

SYSTEM_MESSAGE = (
    "You are a search quality rater judging how relevant a document is to a search query. "
    "You follow the judging protocol you are given exactly."
)

# Used when the protocol defines no grades of its own: UMBRELA's four definitions.
UMBRELA_GRADES = (
    "3 = the document is dedicated to the query and contains the exact answer.\n"
    "2 = the document has some answer for the query, but the answer may be a bit unclear, "
    "or hidden amongst extraneous information.\n"
    "1 = the document seems related to the query but does not answer it.\n"
    "0 = the document has nothing to do with the query."
)

DEFAULT_TEMPLATE = """\
Given a query and a document, you must provide a score on an integer scale of 0 to 3 \
with the following meanings:
$grades

Examples graded by the team (anchors):
$anchors

Rulings on edge cases:
$rulings

Important instruction: apply the definitions above as they are written, the examples as the \
team applies them and the rulings to the cases they name. If no grade above 0 applies, give 0. \
When torn between two grades, choose the lower one.

Query: $query
What the searcher wanted: $description
Document: $document

Answer with a JSON object: "reason", one or two sentences on why, and "grade", the integer \
score."""

REASONING_PREAMBLE = """\
Split this problem into steps:
1. Consider the underlying intent of the search.
2. Measure how well the content matches a likely intent of the query (M).
3. Measure how trustworthy the document is (T).
4. Consider the aspects above and the relative importance of each, and decide on a final \
score (O). The final score must be an integer.
Write these steps, briefly, in "reason"; then give the final score as "grade"."""

PLACEHOLDERS = {
    "intro": "the protocol's introduction (its whole text when it has no structure)",
    "grades": "the grade definitions, highest first",
    "anchors": "the anchor examples: query, document, grade and why",
    "rulings": "the edge-case rulings: question and ruling",
    "query": "the query text",
    "description": "what the searcher wanted (the query's description), or 'not given'",
    "document": "the document: its title, then its text",
}

# The answer's shape, as the `response_format` argument of a Chat Completions call. "reason"
# comes first so that a model writing the JSON in order reasons before it grades.
GRADE_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "relevance_grade",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "reason": {"type": "string"},
                "grade": {"type": "integer", "enum": [0, 1, 2, 3]},
            },
            "required": ["reason", "grade"],
            "additionalProperties": False,
        },
    },
}

NONE_GIVEN = "(none)"
DOCUMENT_CHARS = 8000  # of a document's text shown to the judge (part of a version's digest)


class PromptError(ValueError):
    """A template that cannot be rendered, in words a lead can act on."""


def template_check(template: str) -> None:
    """Raise PromptError naming what is wrong with a custom template (empty = the default)."""
    if not template.strip():
        return
    parsed = string.Template(template)
    if not parsed.is_valid():
        raise PromptError(
            "The prompt template has a '$' that starts no placeholder: write $$ for a dollar "
            "sign, or one of " + _known() + "."
        )
    unknown = [name for name in parsed.get_identifiers() if name not in PLACEHOLDERS]
    if unknown:
        raise PromptError(
            f"Unknown placeholder ${unknown[0]} in the prompt template; the known ones are "
            + _known()
            + "."
        )
    used = set(parsed.get_identifiers())
    for needed in ("query", "document"):
        if needed not in used:
            raise PromptError(f"The prompt template must show the {needed}: add ${needed}.")


def _known() -> str:
    return ", ".join(f"${name}" for name in PLACEHOLDERS)


def effective_template(template: str) -> str:
    return template if template.strip() else DEFAULT_TEMPLATE


def render_messages(
    *,
    template: str,
    protocol: Protocol,
    query: str,
    description: str,
    document: str,
    reasoning: bool,
) -> list[dict[str, str]]:
    """The chat messages of one judgment: the system message, then the rendered template
    (with the reasoning preamble after it when asked for, as UMBRELA places its steps)."""
    chosen = effective_template(template)
    template_check(chosen)
    values = {
        "intro": protocol.intro.strip() or NONE_GIVEN,
        "grades": grades_text(protocol),
        "anchors": anchors_text(protocol),
        "rulings": rulings_text(protocol),
        "query": query.strip(),
        "description": description.strip() or "not given",
        "document": document.strip(),
    }
    user = string.Template(chosen).substitute(values)
    if reasoning:
        user = f"{user}\n\n{REASONING_PREAMBLE}"
    return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": user}]


def grades_text(protocol: Protocol) -> str:
    """The protocol's grades, highest first; a protocol written as free text only gives its
    text (it is where its grades are); one with neither gets UMBRELA's definitions."""
    if protocol.grades:
        ordered = sorted(protocol.grades, key=lambda g: -g.value)
        return "\n".join(f"{g.value} = {g.label}: {g.definition}" for g in ordered)
    if protocol.intro.strip():
        return protocol.intro.strip()
    return UMBRELA_GRADES


def anchors_text(protocol: Protocol) -> str:
    if not protocol.anchors:
        return NONE_GIVEN
    lines = []
    for a in protocol.anchors:
        shown = a.title or a.docid
        text = f' ("{a.excerpt}")' if a.excerpt else ""
        lines.append(f'- Query "{a.query}", document "{shown}"{text}: grade {a.grade}. {a.why}')
    return "\n".join(lines)


def rulings_text(protocol: Protocol) -> str:
    if not protocol.rulings:
        return NONE_GIVEN
    return "\n".join(f"- {r.question} {r.ruling}" for r in protocol.rulings)


def document_text(title: str, text: str, limit: int = DOCUMENT_CHARS) -> str:
    """A document as the judge reads it: its title on the first line when it has one, the
    text cut at a word after `limit` characters (a long web page would cost a hundred times
    a passage and can overflow a small model's context)."""
    body = text.strip()
    if len(body) > limit:
        body = (body[:limit].rsplit(" ", 1)[0] or body[:limit]) + " [...]"
    return f"{title.strip()}\n{body}" if title.strip() else body


def judge_digest(config: Mapping[str, Any]) -> str:
    """The sha256 (hex) of the configuration as canonical JSON: keys sorted, no spaces, so the
    same configuration always gives the same digest and any change gives another."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Parsed:
    """A judge's answer read: a grade and its reason, or (grade None) the error that makes it a
    parse failure."""

    grade: int | None
    reason: str
    error: str

    @property
    def ok(self) -> bool:
        return self.grade is not None


def parse_answer(text: str | None) -> Parsed:
    """Read an answer: a JSON object with an integer `grade` 0-3 and a string `reason`. Anything
    else is a failure that says why; nothing is guessed (no grade fished out of prose, no float
    or boolean taken for an integer)."""
    if text is None or not text.strip():
        return _failure("the answer is empty")
    try:
        value = json.loads(text)
    except ValueError as error:
        return _failure(f"the answer is not JSON ({error.args[0] if error.args else error})")
    if not isinstance(value, dict):
        return _failure(f"the answer is JSON but not an object (a {type(value).__name__})")
    missing = [key for key in ("grade", "reason") if key not in value]
    if missing:
        return _failure("the answer has no " + " and no ".join(repr(k) for k in missing))
    grade, reason = value["grade"], value["reason"]
    # bool is an int in Python: `true` must not pass for grade 1.
    if isinstance(grade, bool) or not isinstance(grade, int):
        return _failure(f"the grade is not an integer: {json.dumps(grade)}")
    if not 0 <= grade <= 3:
        return _failure(f"the grade {grade} is outside 0-3")
    if not isinstance(reason, str):
        return _failure(f"the reason is not a string: {json.dumps(reason)[:80]}")
    return Parsed(grade=grade, reason=reason, error="")


def _failure(error: str) -> Parsed:
    return Parsed(grade=None, reason="", error=error)
