"""The protocol's Markdown subset is rendered safely."""

from __future__ import annotations

from annotation.markdown import render


def test_it_renders_headings_lists_and_inline_marks() -> None:
    text = (
        "# Protocol\n\nRead the **whole** page, not *just* the title.\n\n"
        "- `3`: answers it\n- 0: unrelated\n  and off topic"
    )
    assert render(text) == (
        "<h3>Protocol</h3>\n"
        "<p>Read the <strong>whole</strong> page, not <em>just</em> the title.</p>\n"
        "<ul><li><code>3</code>: answers it</li><li>0: unrelated and off topic</li></ul>"
    )


def test_it_escapes_html_before_anything_else() -> None:
    html = render('# <script>alert(1)</script>\n\n**<img src=x onerror="y">** & `<b>`')
    assert "<script>" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert (
        "<strong>&lt;img src=x onerror=&quot;y&quot;&gt;</strong> &amp; <code>&lt;b&gt;</code>"
        in html
    )


def test_it_leaves_lone_asterisks_alone() -> None:
    assert render("2 * 3 * 4 = 24") == "<p>2 * 3 * 4 = 24</p>"
