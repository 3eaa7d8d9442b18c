"""The API's documentation says what the app serves: docs/api.md's table of operations is exactly
the OpenAPI schema's operations, with the scope each one states; every path the curl
examples of docs/api.md call is in the schema. (tests/api/test_api_live.py runs those curls against daphne.)"""

from __future__ import annotations

import re
from pathlib import Path

from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
METHODS = {"get", "post", "put", "patch", "delete"}


def _schema() -> dict:
    response = Client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    return response.json()


def _operations(schema: dict) -> dict[tuple[str, str], dict]:
    return {
        (method.upper(), path): op
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if method in METHODS
    }


def _doc_table() -> dict[tuple[str, str], str]:
    """docs/api.md's "Operations" rows: (method, path without query or notes) → scope."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## Operations", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\|\s*(GET|POST|PUT|PATCH|DELETE)\s*\|\s*`([^`?]+)[^|]*\|\s*(\w+)\s*\|", line)
        if match:
            rows[(match.group(1), match.group(2))] = match.group(3)
    return rows


def _scope(op: dict) -> str:
    match = re.match(r"Scope `(\w+)`", op.get("description", ""))
    return match.group(1) if match else "none"


def test_docs_table_lists_every_operation_of_the_schema_with_its_scope():
    operations = _operations(_schema())
    table = _doc_table()
    assert set(table) == set(operations)
    assert {key: _scope(op) for key, op in operations.items()} == table
    # Each operation is grouped, summarised and says its scope in the interactive docs.
    for key, op in operations.items():
        assert op.get("tags") and op["tags"] != ["default"] and op.get("summary"), key


def test_every_curl_example_calls_a_path_of_the_schema():
    api_doc = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = api_doc.split("## Examples with curl", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    curls = [line for line in block.splitlines() if line.strip().startswith("curl ")]
    patterns = {
        (method, path): re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")
        for method, path in _operations(_schema())
    }
    called = set()
    for curl in curls:
        url = re.search(r'"\$RAGCHAT(/api/v1/[^"?]*)', curl).group(1)
        method = "DELETE" if "-X DELETE" in curl else "POST" if (" -d " in curl or " -F " in curl) else "GET"
        matching = {key for key, pattern in patterns.items() if key[0] == method and pattern.match(url)}
        assert matching, (method, url)
        called |= matching
    # Every operation has its example: search, chat, the four document calls, sessions, questions, health.
    assert called == set(patterns), sorted(set(patterns) - called)
