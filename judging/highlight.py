"""Query terms highlighted in untrusted document text: escaping is never undone.

The text is cut into pieces around the matches first; every piece is then HTML-escaped and only
the matched pieces are wrapped in <mark>. Matching the raw text rather than the escaped text also
means a term can never match inside an entity (`amp` in `&amp;`) and break it.
"""

from __future__ import annotations

import html
import re

# Words too common to be worth marking: they would light up every line.
STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
        "how", "i", "in", "is", "it", "my", "of", "on", "or", "the", "to", "what", "when",
        "where", "which", "who", "why", "with", "you", "your",
    }
)  # fmt: skip
_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """The words of a query worth marking: lower-cased, deduplicated, longest first."""
    words = {w.lower() for w in _WORD.findall(query)}
    terms = [w for w in words if len(w) > 1 and w not in STOPWORDS]
    return sorted(terms, key=lambda w: (-len(w), w))


def highlight(text: str, terms: list[str]) -> str:
    """`text` as HTML, escaped, with every word starting with one of `terms` in <mark>."""
    if not terms:
        return html.escape(text)
    alternatives = "|".join(re.escape(term) for term in terms)
    pattern = re.compile(rf"\b(?:{alternatives})\w*", re.IGNORECASE | re.UNICODE)
    out: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        out.append(html.escape(text[last : match.start()]))
        out.append(f"<mark>{html.escape(match.group(0))}</mark>")
        last = match.end()
    out.append(html.escape(text[last:]))
    return "".join(out)
