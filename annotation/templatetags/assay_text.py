from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from annotation.markdown import render, render_inline

register = template.Library()


@register.filter(name="protocol_markdown")
def protocol_markdown(text: str) -> SafeString:
    # Safe: render() escapes the whole text before adding its own tags.
    return mark_safe(render(text))


@register.filter(name="protocol_inline")
def protocol_inline(text: str) -> SafeString:
    # Safe: render_inline() escapes the whole text before adding its own tags.
    return mark_safe(render_inline(text))
