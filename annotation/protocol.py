"""The judging protocol as a structured object: no Django here.

A protocol is an introduction (Markdown), the grades (value, short label, definition), anchor
examples taken from the project's own corpus (query, document, grade, why) and edge-case rulings
(question -> ruling). A published version stores both this structure (as JSON, for the judging
page's panel) and its rendering as one Markdown document (what annotators read in full, what
the diff between two versions compares).
"""

from __future__ import annotations

import difflib
from collections.abc import Container, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

GRADE_VALUES = (0, 1, 2, 3)


@dataclass(frozen=True)
class GradeDef:
    value: int
    label: str
    definition: str


@dataclass(frozen=True)
class Anchor:
    query: str
    docid: str
    grade: int
    why: str
    title: str = ""  # the document's title when the version was published
    # A few lines of the document, for an anchor taken from an adjudicated pair: annotators
    # see what was judged without opening the corpus.
    excerpt: str = ""


@dataclass(frozen=True)
class Ruling:
    question: str
    ruling: str


@dataclass(frozen=True)
class Protocol:
    intro: str = ""
    grades: tuple[GradeDef, ...] = ()
    anchors: tuple[Anchor, ...] = ()
    rulings: tuple[Ruling, ...] = field(default=())

    @property
    def is_structured(self) -> bool:
        return bool(self.grades or self.anchors or self.rulings)


def from_content(content: Mapping[str, Any], intro: str = "") -> Protocol:
    """Read the JSON `content` of a version or a draft; unknown keys are ignored."""
    return Protocol(
        intro=str(content.get("intro", intro)),
        grades=tuple(
            GradeDef(int(g["value"]), str(g["label"]), str(g["definition"]))
            for g in content.get("grades", [])
        ),
        anchors=tuple(
            Anchor(
                str(a["query"]),
                str(a["docid"]),
                int(a["grade"]),
                str(a["why"]),
                str(a.get("title", "")),
                str(a.get("excerpt", "")),
            )
            for a in content.get("anchors", [])
        ),
        rulings=tuple(
            Ruling(str(r["question"]), str(r["ruling"])) for r in content.get("rulings", [])
        ),
    )


def to_content(protocol: Protocol) -> dict[str, Any]:
    return {
        "intro": protocol.intro,
        "grades": [asdict(g) for g in protocol.grades],
        "anchors": [asdict(a) for a in protocol.anchors],
        "rulings": [asdict(r) for r in protocol.rulings],
    }


def problems(protocol: Protocol, corpus: Container[str]) -> list[str]:
    """What stops this protocol from being published, in words a lead can act on."""
    found: list[str] = []
    values = [g.value for g in protocol.grades]
    if sorted(values) != list(GRADE_VALUES):
        found.append("Define each grade 0, 1, 2 and 3 exactly once.")
    for grade in protocol.grades:
        if not grade.label.strip() or not grade.definition.strip():
            found.append(f"Grade {grade.value} needs a label and a definition.")
    for n, anchor in enumerate(protocol.anchors, start=1):
        if anchor.docid not in corpus:
            found.append(f"Anchor {n}: document {anchor.docid!r} is not in the project's corpus.")
        if anchor.grade not in GRADE_VALUES:
            found.append(f"Anchor {n}: the grade must be 0, 1, 2 or 3.")
        if not anchor.query.strip() or not anchor.why.strip():
            found.append(f"Anchor {n} needs a query and a reason why.")
    for n, ruling in enumerate(protocol.rulings, start=1):
        if not ruling.question.strip() or not ruling.ruling.strip():
            found.append(f"Ruling {n} needs both a question and a ruling.")
    return found


def render_markdown(protocol: Protocol) -> str:
    """The whole protocol as one Markdown document (the `annotation.markdown` subset)."""
    parts = [protocol.intro.strip()] if protocol.intro.strip() else []
    if protocol.grades:
        lines = [f"- **{g.value}, {g.label}**: {g.definition}" for g in _by_value(protocol)]
        parts.append("## Grades\n\n" + "\n".join(lines))
    if protocol.anchors:
        lines = [
            f'- **{a.grade}**: "{a.query}" → *{a.title or a.docid}* (`{a.docid}`)'
            + (f", which reads: “{a.excerpt}”" if a.excerpt else "")
            + f". {a.why}"
            for a in protocol.anchors
        ]
        parts.append("## Anchor examples\n\n" + "\n".join(lines))
    if protocol.rulings:
        lines = [f"- **{r.question}** {r.ruling}" for r in protocol.rulings]
        parts.append("## Edge cases\n\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"


EXCERPT_CHARS = 300


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of a document as one line: whitespace collapsed, cut at a word with "…"."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0] or line[:limit]
    return cut + "…"


def _by_value(protocol: Protocol) -> list[GradeDef]:
    return sorted(protocol.grades, key=lambda g: -g.value)


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "added", "removed", "same" or "gap" (unchanged lines left out)
    text: str


def diff(old: str, new: str, context: int = 2) -> list[DiffLine]:
    """What changed between two protocol texts, line by line, with a little context."""
    a, b = old.splitlines(), new.splitlines()
    out: list[DiffLine] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        if out:
            out.append(DiffLine("gap", "…"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(DiffLine("same", line) for line in a[i1:i2])
                continue
            out.extend(DiffLine("removed", line) for line in a[i1:i2])
            out.extend(DiffLine("added", line) for line in b[j1:j2])
    return out


def starter(project_name: str) -> Protocol:
    """The draft a new project's protocol editor opens on: the usual four grades, worded
    generally, and an introduction that says what is left to write. The method asks for the
    protocol before anyone judges; a blank editor gives a lead nothing to react to, and a
    published default would stamp judgments with a definition nobody on the team wrote."""
    intro = (
        f"# Judging protocol: {project_name}\n\n"
        "## Task\n\n"
        "For each query, grade how well the shown document answers what the person who typed "
        "the query needed. Read the query and settle on what they want to get done, then read "
        "the whole document, not only its title.\n\n"
        "When torn between two grades, choose the lower one and leave a short note.\n\n"
        "(A starter draft: say who searches and for what, add anchor examples from your own "
        "corpus and the edge cases your team has met, then publish.)"
    )
    grades = (
        GradeDef(3, "Perfectly relevant", "the document answers the query on its own."),
        GradeDef(
            2,
            "Highly relevant",
            "the document answers the query but needs another page or extra steps.",
        ),
        GradeDef(1, "Related", "the document is on the topic but does not answer the query."),
        GradeDef(0, "Irrelevant", "nothing useful for this query."),
    )
    return Protocol(intro=intro, grades=grades)
