"""The figures file: the latest results of `manage.py bench` and `manage.py evaluate`, each with the
date, the commit and the machine it ran on, in docs/benchmarks.json and rendered as the table
docs/benchmarks.md. A run replaces its own section (one per command line) and keeps the others, so
the figures the documents quote are always what a command produced, never typed in by hand.

Another command records its figures the same way: `figures_record(section, command=..., rows=[...],
path=...)` with rows of `{"figure": ..., "value": ...}` (value: the text shown, unit included).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FIGURES_FILE = Path("docs") / "benchmarks.json"


def machine_describe() -> dict[str, Any]:
    """The CPU model, how many cores this process may use and the load average (1 minute) as the
    run ends: the figures depend on all three."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    described = {"cpu": model or platform.processor() or platform.machine(), "cores": cores}
    if hasattr(os, "getloadavg"):
        # What else ran: times measured on a loaded box are not the product's.
        described["load"] = round(os.getloadavg()[0], 1)
    return described


def commit_describe(root: Path, *, written: tuple[Path, ...] = ()) -> str:
    """The checked-out commit, marked when tracked files differ from it (the figures are then of
    code no commit holds); the files the writer itself rewrites (`written`) do not count."""
    try:
        top = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        exclude = [
            f":(exclude){p.resolve().relative_to(Path(top).resolve())}" for p in written if _inside(p, Path(top))
        ]
        changed = subprocess.run(
            ["git", "-C", top, "status", "--porcelain", "--untracked-files=no", "--", ".", *exclude],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit} with uncommitted changes" if changed else commit


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def figures_record(
    section: str,
    *,
    command: str,
    rows: list[dict[str, str]],
    path: Path,
    note: str = "",
    now: datetime | None = None,
    readme: Path | None = None,
) -> dict[str, Any]:
    """Replace `section` of the figures file at `path` (JSON) with these rows, keep the other
    sections, and write the rendered table next to it (same name, `.md`); with `readme`, the rows of
    its figures table that quote this section get the new values too. Returns the whole file."""
    path = Path(path)
    figures = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    figures[section] = {
        "command": command,
        "date": (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit_describe(
            path.resolve().parent, written=(path, path.with_suffix(".md"), *([Path(readme)] if readme else []))
        ),
        **machine_describe(),
        "note": note,
        "figures": [{"figure": str(r["figure"]), "value": str(r["value"])} for r in rows],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(figures_render(figures), encoding="utf-8")
    if readme is not None and Path(readme).exists():
        readme_refresh(Path(readme), figures)
    return figures


def readme_refresh(readme: Path, figures: dict[str, Any]) -> None:
    """In the README's "## Figures" table (figure | value | `command`), give every row whose
    command and figure the figures file holds that file's value, so the README never quotes a
    figure the commands did not write last."""
    text = readme.read_text(encoding="utf-8")
    head, marker, rest = text.partition("\n## Figures\n")
    if not marker:
        return
    section, heading, tail = rest.partition("\n## ")
    lines = []
    for line in section.split("\n"):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 3 and cells[2].startswith("`") and cells[2].strip("`") in figures:
            written = {r["figure"]: r["value"] for r in figures[cells[2].strip("`")]["figures"]}
            if cells[0] in written:
                line = f"| {cells[0]} | {_cell(written[cells[0]])} | {cells[2]} |"
        lines.append(line)
    updated = head + marker + "\n".join(lines) + heading + tail
    if updated != text:
        readme.write_text(updated, encoding="utf-8")


def figures_render(figures: dict[str, Any]) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Generated: each run of `manage.py bench` or `manage.py evaluate` replaces its own section of",
        "`docs/benchmarks.json` and this table (`ragchat/bench/figures.py`); do not edit by hand. Times depend",
        "on the machine and on what else runs on it; every section says where it ran. What the figures",
        "mean and what moves them: [performance.md](performance.md), [answer-quality.md](answer-quality.md).",
    ]
    for section in sorted(figures):
        entry = figures[section]
        lines += [
            "",
            f"## `{section}`",
            "",
            f"{entry['date']}, commit `{entry['commit']}`, {entry['cpu']}, {entry['cores']} cores"
            + (f", load average {entry['load']} as the run ended." if entry.get("load") is not None else ".")
            + (f" {entry['note']}" if entry.get("note") else ""),
            f"Command: `{entry['command']}`.",
            "",
            "| figure | value |",
            "|---|---|",
        ]
        lines += [f"| {_cell(row['figure'])} | {_cell(row['value'])} |" for row in entry["figures"]]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(figure: str, value: str) -> dict[str, str]:
    return {"figure": figure, "value": value}


def bench_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """The headline figures of a `manage.py bench` report."""
    rows = []
    for r in report.get("ingest", []):
        rows.append(
            _row(
                f"ingestion, {r['embedder']} embedder ({r['documents']} files, {r['chunks']} chunks)",
                f"{r['chunks_per_s']:.1f} chunks/s",
            )
        )
    for r in report.get("search", []):
        where = "embedded store" if r["backend"] == "edge" else "Qdrant server"
        rows.append(
            _row(
                f"filtered search p50 / p95, {where}, {r['chunks']:,} chunks",
                f"{r['search_p50_ms']:.1f} / {r['search_p95_ms']:.1f} ms",
            )
        )
        if r.get("dense_recall@10") is not None:
            rows.append(
                _row(
                    f"dense stage recall@10 against an exact filtered scan, {r['chunks']:,} chunks",
                    f"{r['dense_recall@10']:.3f} at p50 / p95 {r['dense_p50_ms']:.1f} / {r['dense_p95_ms']:.1f} ms"
                    f" (exact scan {r['exact_p50_ms']:.1f} / {r['exact_p95_ms']:.1f} ms)",
                )
            )
        if r.get("store_rss_mb") is not None:
            rows.append(_row(f"memory of the open {where}, {r['chunks']:,} chunks", f"{r['store_rss_mb']} MB"))
    gap = report.get("report")
    if gap:
        rows.append(
            _row(
                f"knowledge-gap report, 90 days holding {gap['messages']:,} messages: one tag / no tag (median)",
                f"{gap['report']['tag']['median_s']} / {gap['report']['no_tag']['median_s']} s",
            )
        )
    for r in report.get("peers") or []:
        if "skipped" in r:
            continue
        rows.append(
            _row(
                f"peers, {r['chunks']:,} {r.get('vectors', 'hashing')} vectors: {r['system']} p50 / p95, recall@10",
                f"{r['p50_ms']:.1f} / {r['p95_ms']:.1f} ms, {r['recall@10']:.3f}",
            )
        )
    chat = report.get("chat")
    if chat:
        t = chat["ttft"]
        rows.append(
            _row(
                f"time to first token through the websocket, zero-latency model, {chat['chunks']:,} chunks, p50 / p95",
                f"{t['ttft_p50_ms']} / {t['ttft_p95_ms']} ms",
            )
        )
        for c in chat["concurrent"]:
            what = f"{c['streams']} questions at once, {c['tokens_per_stream']}-token answers"
            rows.append(_row(f"{what}: TTFT p95", f"{c['ttft_p95_ms'] / 1000:.2f} s"))
            rows.append(
                _row(
                    f"{what}: completed, lost / reordered tokens",
                    f"{c['completed']} of {c['streams']}, {c['lost_tokens']} / {c['reordered_frames']}",
                )
            )
            rows.append(
                _row(
                    f"{what}: added per-token latency p50 / p95 ({c['token_interval_ms']} ms/token)",
                    f"{c['added_latency_p50_ms']} / {c['added_latency_p95_ms']} ms",
                )
            )
        for c in chat.get("new_chats", []):
            what = f"{c['chats']} new chats at once from the landing page, {c['tokens_per_chat']}-token answers"
            rows.append(
                _row(
                    f"{what}: TTFT from the websocket's open p50 / p95",
                    f"{c['ttft_p50_ms'] / 1000:.2f} / {c['ttft_p95_ms'] / 1000:.2f} s"
                    if c["ttft_p95_ms"] is not None
                    else "no answer",
                )
            )
            if c.get("click_to_first_token_p95_ms") is not None:
                rows.append(
                    _row(
                        f"{what}: from the click to the first token p50 / p95 (the chat's page p95)",
                        f"{c['click_to_first_token_p50_ms'] / 1000:.2f} / {c['click_to_first_token_p95_ms'] / 1000:.2f} s"
                        f" ({c['click_to_page_p95_ms'] / 1000:.2f} s)",
                    )
                )
            rows.append(
                _row(
                    f"{what}: answered, lost / reordered tokens",
                    f"{c['completed']} of {c['chats']}, {c['lost_tokens']} / {c['reordered_frames']}",
                )
            )
        tabs = chat.get("open_websockets")
        if tabs and tabs.get("per_socket_kb") is not None:
            rows.append(
                _row(f"server memory per open chat tab ({tabs['sockets']} idle tabs)", f"{tabs['per_socket_kb']} KB")
            )
        rows.append(_row("server peak memory", f"{chat['server_peak_rss_mb']} MB"))
    return rows


def evaluation_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """The headline figures of a `manage.py evaluate` report."""
    rows = [
        _row(
            "corpus",
            f"{report['documents']} documents, {report['chunks']} chunks, {report['questions']} questions,"
            f" embedder {report['embedder']}",
        )
    ]
    for mode, s in report["modes"].items():
        rows.append(
            _row(
                f"{mode}: recall@1 / recall@5 / MRR / nDCG@10",
                f"{s['recall@1']:.3f} / {s['recall@5']:.3f} / {s['mrr']:.3f} / {s['ndcg@10']:.3f}",
            )
        )
        rows.append(_row(f"{mode}: support@5", f"{s['support@5']:.1%}"))
        if s.get("citation_validity") is not None:
            rows.append(_row(f"{mode}: citation validity", f"{s['citation_validity']:.1%}"))
        rows.append(_row(f"{mode}: leakage (chunks outside the asker's tags or tenant)", str(s["leakage"])))
    grounding = report.get("grounding")
    if grounding:
        rows.append(
            _row(
                f"grounding check on its labelled set ({grounding['sentences']} sentences): precision / recall",
                f"{grounding['precision']:.2f} / {grounding['recall']:.2f}",
            )
        )
    return rows


def answer_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """The headline figures of a `manage.py evaluate --answers` report."""
    s = report["summary"]
    return [
        _row(
            "model; labelled questions",
            f"{report['model']}; {s['answerable']} answerable, {s['unanswerable']} unanswerable",
        ),
        _row("answerable answers with >=1 valid citation", f"{s['answerable_cited']:.0%}"),
        _row(
            "supported sentences without a citation",
            f"{s['uncited_supported_sentences']} of {s['supported_sentences']}",
        ),
        _row("expected fact in the answer", f"{s['fact_in_answer']:.0%}"),
        _row(
            'false "I don\'t know" (stated in one passage)',
            f"{s['false_dont_know']} ({s['false_dont_know_single_passage']})",
        ),
        _row("routed: answerable / unanswerable", f"{s['answerable_routed']:.0%} / {s['unanswerable_routed']:.0%}"),
        _row("hallucinated answers not routed", str(s["hallucinated_not_routed"])),
        _row(
            "seconds per answer: mean / median / max",
            f"{s['seconds_per_answer']:.1f} / {s['seconds_median']:.1f} / {s['seconds_max']:.1f}",
        ),
    ]


def habit_rows(reports: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    """`manage.py evaluate --answers --test-server`'s figures over several citation habits: a figure
    alike in every habit once, otherwise its value in each."""
    first = next(iter(reports.values()))
    s = first["summary"]
    rows = [
        _row(
            "model; labelled questions; citation habits",
            f"the test server's careful model; {s['answerable']} answerable, {s['unanswerable']} unanswerable;"
            f" {len(reports)} ({', '.join(reports)})",
        )
    ]
    by_habit = {habit: answer_rows(report)[1:] for habit, report in reports.items()}
    for i, row in enumerate(next(iter(by_habit.values()))):
        values = {habit: rows_[i]["value"] for habit, rows_ in by_habit.items()}
        if row["figure"].startswith("seconds per answer"):
            continue  # the test server answers at once: the time is the pipeline's, not a model's
        if len(set(values.values())) == 1:
            rows.append(_row(row["figure"], f"{row['value']} in each habit"))
        else:
            rows.append(_row(row["figure"], "; ".join(f"{habit} {value}" for habit, value in values.items())))
    return rows
