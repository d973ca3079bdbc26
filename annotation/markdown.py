"""A deliberately small Markdown subset for protocols: safe by construction.

The text is HTML-escaped first; only then are headings, bullet lists, paragraphs and the inline
marks **bold**, *italic* and `code` turned into tags. No raw HTML, links or images pass through,
so a protocol can never inject markup into the judging page.
"""

from __future__ import annotations

import html
import re

_INLINE = [
    (re.compile(r"`([^`]+)`"), r"<code>\1</code>"),
    (re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"),
    (re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"), r"<em>\1</em>"),
]
_HEADING = re.compile(r"^(#{1,4})\s+(.*)$")
_BULLET = re.compile(r"^\s*[-*]\s+(.*)$")


def render(text: str) -> str:
    """Render the Markdown subset to HTML; every character of `text` is escaped first."""
    blocks: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            blocks.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in html.escape(text).splitlines():
        heading, bullet = _HEADING.match(line), _BULLET.match(line)
        if heading:
            flush()
            level = len(heading.group(1)) + 2  # h3..h6: the page already has h1/h2
            blocks.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif bullet:
            if paragraph:
                flush()
            items.append(bullet.group(1))
        elif not line.strip():
            flush()
        elif items:
            items[-1] += " " + line.strip()  # continuation of a list item
        else:
            paragraph.append(line.strip())
    flush()
    return "\n".join(blocks)


def render_inline(text: str) -> str:
    """Only the inline marks (**bold**, *italic*, `code`), for one-line fields such as a
    grade's definition or a ruling; every character of `text` is escaped first."""
    return _inline(html.escape(text))


def _inline(text: str) -> str:
    for pattern, replacement in _INLINE:
        text = pattern.sub(replacement, text)
    return text
