"""Query terms highlighted in untrusted document text: escaping is never undone.

The text is cut into pieces around the matches first; every piece is then HTML-escaped and only
the matched pieces are wrapped in <mark>. Matching the raw text rather than the escaped text also
means a term can never match inside an entity (`amp` in `&amp;`) and break it.

The work is bounded whatever the input: at most MAX_TERMS terms go into one alternation,
compiled once per item shown, and at most a fixed number of characters of a document is shown
(with a notice saying how much). A regular expression tries its alternatives at each position,
so the cost is about (characters shown) x (terms): a 5,000-word query against a 1 MB document
took seconds per render before both were capped.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

# Words too common to be worth marking: they would light up every line.
STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
        "how", "i", "in", "is", "it", "my", "of", "on", "or", "the", "to", "what", "when",
        "where", "which", "who", "why", "with", "you", "your",
    }
)  # fmt: skip
_WORD = re.compile(r"\w+", re.UNICODE)

# Distinct terms marked: a real query has a handful; beyond 50 the marks no longer guide the
# eye, and each more term is one more alternative tried at every character.
MAX_TERMS = 50
# Characters of a document's text shown on the judging page: about 30 printed pages, far more
# than anyone reads to grade one document, and small enough to escape and mark in milliseconds.
MAX_TEXT_CHARS = 100_000
# A title is one line; a longer one is a broken document, shown cut.
MAX_TITLE_CHARS = 1_000


def query_terms(query: str) -> list[str]:
    """The words of a query worth marking: lower-cased, deduplicated, longest first; the first
    MAX_TERMS distinct ones in the order the query gives them."""
    terms: dict[str, None] = {}
    for match in _WORD.finditer(query):
        word = match.group(0).lower()
        if len(word) > 1 and word not in STOPWORDS:
            terms[word] = None
            if len(terms) == MAX_TERMS:
                break
    return sorted(terms, key=lambda w: (-len(w), w))


def term_pattern(terms: list[str]) -> re.Pattern[str] | None:
    """One alternation of the terms (a word starting with any of them), to compile once per
    item and use on its title and its text; None when there is nothing to mark."""
    if not terms:
        return None
    alternatives = "|".join(re.escape(term) for term in terms[:MAX_TERMS])
    return re.compile(rf"\b(?:{alternatives})\w*", re.IGNORECASE | re.UNICODE)


def highlight(text: str, pattern: re.Pattern[str] | None) -> str:
    """`text` as HTML, escaped, with every match of `pattern` in <mark>."""
    if pattern is None:
        return html.escape(text)
    out: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        out.append(html.escape(text[last : match.start()]))
        out.append(f"<mark>{html.escape(match.group(0))}</mark>")
        last = match.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


@dataclass(frozen=True)
class Shown:
    """A document's title and text as the page shows them: escaped, marked, and cut to the
    limits; `text_length` is the whole text's length, to say how much was left out."""

    title: str
    text: str
    text_shown: int
    text_length: int

    @property
    def truncated(self) -> bool:
        return self.text_shown < self.text_length


def shown_document(query: str, title: str, text: str) -> Shown:
    """Title and text of a document as HTML with the query's terms marked, in time linear in
    the characters shown (at most MAX_TITLE_CHARS + MAX_TEXT_CHARS) times at most MAX_TERMS."""
    pattern = term_pattern(query_terms(query))
    cut = text[:MAX_TEXT_CHARS]
    return Shown(
        title=highlight(title[:MAX_TITLE_CHARS], pattern),
        text=highlight(cut, pattern),
        text_shown=len(cut),
        text_length=len(text),
    )
