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
    assert (
        bench["load"] >= 0
        and f"{bench['cores']} cores, load average {bench['load']}" in path.with_suffix(".md").read_text()
    )
    assert figures["manage.py evaluate"]["figures"] == [{"figure": "hybrid: support@5", "value": "100.0%"}]
    table = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert table.index("## `manage.py bench --quick`") < table.index("## `manage.py evaluate`")
    assert "| search p95 | 2.5 ms |" in table and "3.0 ms" not in table
    assert "| a \\| b | 1 |" in table  # a cell's bar does not split the row
    assert "| hybrid: support@5 | 100.0% |" in table


def test_the_readme_rows_quoting_a_section_get_its_new_values(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "# app\n\n## Figures\n\n| figure | value | command |\n|---|---|---|\n"
        "| search p95 | 3.0 ms | `manage.py bench --quick` |\n"
        "| hybrid: support@5 | 99.0% | `manage.py evaluate` |\n"
        "| gone | 1 | `manage.py bench --quick` |\n\n## Where next\n\n| search p95 | 7 ms | `manage.py bench --quick` |\n"
    )
    figures_record(
        "manage.py bench --quick",
        command="manage.py bench --quick",
        rows=[{"figure": "search p95", "value": "2.5 ms"}],
        path=tmp_path / "docs" / "benchmarks.json",
        readme=readme,
    )
    text = readme.read_text()
    assert "| search p95 | 2.5 ms | `manage.py bench --quick` |" in text
    assert "| hybrid: support@5 | 99.0% | `manage.py evaluate` |" in text  # another command's section
    assert "| gone | 1 | `manage.py bench --quick` |" in text  # a figure the run no longer writes: kept
    assert text.endswith("| search p95 | 7 ms | `manage.py bench --quick` |\n")  # outside the figures table


def test_the_commit_is_marked_when_code_differs_from_it_but_not_for_the_figures_themselves(tmp_path):
    import subprocess

    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True, text=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    path = tmp_path / "docs" / "benchmarks.json"
    rows = [{"figure": "f", "value": "1"}]
    figures_record("a", command="a", rows=rows, path=path)
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")
    head = git("rev-parse", "--short=12", "HEAD").stdout.strip()
    # The figures files are tracked and rewritten by the run: still the commit itself.
    assert figures_record("a", command="a", rows=rows, path=path)["a"]["commit"] == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert figures_record("a", command="a", rows=rows, path=path)["a"]["commit"] == f"{head} with uncommitted changes"
