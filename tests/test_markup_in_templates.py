"""All markup lives in templates: no non-test Python module builds HTML tags in string literals.

Python renders fragments through `ragchat.partials.render_partial`; Markdown becomes HTML through
markdown-it and nh3 (chat.rendering), which is a sanitiser's output, not hand-built markup. The scan
reads every string constant that is not a docstring (f-string parts included) and flags an opening or
closing tag of an HTML element.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".venv", "tests", "build", "data", "node_modules", "migrations", "__pycache__"}
ELEMENTS = (
    "a|abbr|article|aside|b|blockquote|body|br|button|caption|code|dd|details|div|dl|dt|em|fieldset|footer|"
    "form|h[1-6]|head|header|hr|html|i|img|input|label|legend|li|main|meta|meter|nav|ol|option|p|pre|progress|"
    "script|section|select|small|span|strong|style|summary|table|tbody|td|template|textarea|th|thead|time|"
    "title|tr|u|ul"
)
TAG_RE = re.compile(rf"</?(?:{ELEMENTS})(?=[\s/>])", re.IGNORECASE)

# Modules that hold HTML for a reason other than building the app's pages, each with that reason.
ALLOWED = {
    # writes a demo *document* (an intranet page to ingest), the way the PDF and DOCX ones are written
    "documents/demo_corpus.py",
    # writes the evaluation corpus's HTML documents, next to its PDF and DOCX generators
    "ragchat/evaluation/docgen.py",
    # the load benchmark reads an error sentence out of the HTML frames it receives
    "ragchat/bench/chat_load.py",
}


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if SKIP_DIRS.intersection(relative.parts[:-1]) or relative.parts[0].startswith("."):
            continue
        yield relative.as_posix(), path


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def html_literals(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if TAG_RE.search(node.value):
                found.append((node.lineno, node.value[:80]))
    return found


def test_no_python_module_builds_html_in_strings():
    offenders = {
        name: hits
        for name, path in _modules()
        if name not in ALLOWED and (hits := html_literals(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, f"move this markup into a template (render_partial): {offenders}"


def test_the_scan_sees_tags_in_strings_and_f_strings_but_not_docstrings():
    source = '''"""A module about <div> elements."""
x = '<div class="a">'
y = f'<span id="{x}">'
z = "a < b and <id> placeholders"
'''
    assert [line for line, _ in html_literals(source)] == [2, 3]


def test_the_allowlist_is_still_needed():
    names = dict(_modules())
    for name in ALLOWED:
        assert name in names, f"{name} moved or is gone: update the allowlist"
        assert html_literals(names[name].read_text(encoding="utf-8")), f"{name} no longer needs an exception"


TEMPLATES = ROOT / "templates"
SCRIPTS = ROOT / "static" / "js"


def test_one_confirm_pattern_and_no_inline_script():
    """Confirmation is data-confirm (static/js/confirm.js) everywhere; no inline handlers or scripts,
    which a Content-Security-Policy without 'unsafe-inline' would block."""
    inline_handler = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
    inline_script = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
    problems = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(TEMPLATES).as_posix()
        problems += [f"{name}: hx-confirm" for _ in re.finditer(r"hx-confirm", text)]
        problems += [f"{name}: inline handler" for _ in inline_handler.finditer(text)]
        problems += [f"{name}: inline script" for _ in inline_script.finditer(text)]
    assert problems == []


def test_one_live_update_protocol():
    """Live pages connect through htmx's ws extension (ws-connect); no script opens its own socket or
    parses JSON frames."""
    for path in sorted(SCRIPTS.glob("*.js")):
        text = path.read_text(encoding="utf-8")
        assert "new WebSocket(" not in text and "JSON.parse" not in text, path.name
    live_pages = [p for p in TEMPLATES.rglob("*.html") if "ws-connect=" in p.read_text(encoding="utf-8")]
    assert {p.relative_to(TEMPLATES).as_posix() for p in live_pages} == {
        "_base.html",  # every page's navigation badges (ws/nav/)
        "chat/session.html",
        "documents/list.html",
        "documents/site_detail.html",
        "documents/sites.html",
        "routing/inbox.html",
    }
