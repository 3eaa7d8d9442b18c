"""The figures file (ragchat/bench/figures.py): a run replaces its own section and keeps the others,
and the rendered table says what the JSON holds."""

import json
from datetime import UTC, datetime

from ragchat.bench.figures import figures_record


def test_a_run_replaces_its_own_section_and_keeps_the_others(tmp_path):
    path = tmp_path / "docs" / "benchmarks.json"
    first = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    figures_record(
        "manage.py bench --quick",
        command="manage.py bench --quick",
        rows=[{"figure": "search p95", "value": "3.0 ms"}],
        path=path,
        now=first,
    )
    figures_record(
        "manage.py evaluate",
        command="manage.py evaluate",
        rows=[{"figure": "hybrid: support@5", "value": "100.0%"}],
        path=path,
    )
    figures_record(
        "manage.py bench --quick",
        command="manage.py bench --quick",
        rows=[{"figure": "search p95", "value": "2.5 ms"}, {"figure": "a | b", "value": "1"}],
        path=path,
    )
    figures = json.loads(path.read_text())
    assert set(figures) == {"manage.py bench --quick", "manage.py evaluate"}
    bench = figures["manage.py bench --quick"]
    assert bench["figures"] == [{"figure": "search p95", "value": "2.5 ms"}, {"figure": "a | b", "value": "1"}]
    assert bench["date"] != first.strftime("%Y-%m-%d %H:%M UTC") and bench["cores"] >= 1 and bench["cpu"]
    assert figures["manage.py evaluate"]["figures"] == [{"figure": "hybrid: support@5", "value": "100.0%"}]
    table = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert table.index("## `manage.py bench --quick`") < table.index("## `manage.py evaluate`")
    assert "| search p95 | 2.5 ms |" in table and "3.0 ms" not in table
    assert "| a \\| b | 1 |" in table  # a cell's bar does not split the row
    assert "| hybrid: support@5 | 100.0% |" in table
