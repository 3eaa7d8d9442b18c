"""The one way Python code produces HTML: render a template partial by name.

Markup lives in templates (`templates/<app>/_name.html`, auto-escaped); Python passes data. Views,
consumers and the streaming chat all call `render_partial`, so there is one place to look for how a
fragment is made. Markdown-to-HTML (markdown-it + nh3) is a sanitiser's job, not markup, and stays in
chat.rendering.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import get_template
from django.utils.safestring import SafeString


def render_partial(name: str, context: dict[str, Any] | None = None) -> SafeString:
    """`name` is a template path such as "chat/_note.html"; the result is safe to embed in another
    partial (templates escape what they are given)."""
    # get_template goes through the cached loader: after the first call a render is the whole cost.
    return SafeString(get_template(name).render(context))
