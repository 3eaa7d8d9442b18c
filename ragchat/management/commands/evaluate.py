"""manage.py evaluate: retrieval quality on a folder and gold questions, in a scratch collection.

Without --folder, the generated evaluation corpus is written to a temporary folder and used.
"""

import json
import logging
import shutil
import tempfile
from pathlib import Path

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ragchat.bench.figures import FIGURES_FILE, evaluation_rows, figures_record
from ragchat.evaluation import runner
from ragchat.evaluation.corpus import QUESTIONS_FILE, write_corpus
from ragchat.services.vector_store import SEARCH_MODES


class Command(BaseCommand):
    help = (
        "Evaluate retrieval (recall@1/5, MRR, nDCG@10, support@5, citation validity, leakage) in a scratch collection."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--folder", help="documents in subfolders (the first folder is the tag); default: the generated corpus"
        )
        parser.add_argument("--questions", help="gold questions JSONL; default: <folder>/questions.jsonl")
        parser.add_argument("--mode", choices=[*SEARCH_MODES, "all"], default="all")
        parser.add_argument("--embedder", choices=sorted(runner.EMBEDDERS), default="local")
        parser.add_argument("--json", dest="json_out", help="also write the full report (per question) here")
        parser.add_argument("--limit", type=int, default=0, help="only the first N questions")
        parser.add_argument("--no-citations", action="store_true", help="skip the RAG pipeline citation check")
        parser.add_argument(
            "--figures",
            default=None,
            help=f"the figures file whose section of this command line the run replaces (default: {FIGURES_FILE}"
            " under the project folder for the generated corpus; with --folder or --questions only when given)",
        )
        parser.add_argument("--no-figures", action="store_true", help="leave the figures file alone")

    def handle(
        self, *args, folder, questions, mode, embedder, json_out, limit, no_citations, figures, no_figures, **options
    ):
        # The figures file holds the generated corpus's figures; a run on your own documents writes
        # there only when asked to.
        figures_path = None if no_figures else figures or (None if folder or questions else str(FIGURES_FILE))
        command = " ".join(
            ["manage.py evaluate"]
            + ([f"--embedder {embedder}"] if embedder != "local" else [])
            + ([f"--mode {mode}"] if mode != "all" else [])
            + ([f"--limit {limit}"] if limit else [])
            + (["--no-citations"] if no_citations else [])
            + (["--folder …"] if folder else [])
            + (["--questions …"] if questions else [])
        )
        # Per-request INFO logs of the pipeline would drown the table; the forged citations the
        # check injects are logged as warnings by design.
        quiet = logging.getLogger("ragchat")
        previous_level = quiet.level  # restored: call_command (tests) must not silence the process
        quiet.setLevel(logging.ERROR)
        temp = None
        if not folder:
            temp = tempfile.mkdtemp(prefix="ragchat-eval-corpus-")
            folder, _ = write_corpus(temp)
        try:
            questions_path = Path(questions) if questions else Path(folder) / QUESTIONS_FILE
            if not questions_path.exists():
                raise CommandError(f"no question file at {questions_path}")
            gold = runner.load_questions(questions_path)
            if limit:
                gold = gold[:limit]
            modes = list(SEARCH_MODES) if mode == "all" else [mode]
            report = async_to_sync(runner.run_evaluation)(
                folder=folder,
                questions=gold,
                base_settings=settings.RAG,
                embedder=embedder,
                modes=modes,
                citations=not no_citations,
                progress=lambda m: self.stderr.write(m),
            )
        finally:
            quiet.setLevel(previous_level)
            if temp:
                shutil.rmtree(temp, ignore_errors=True)
        self.stdout.write(runner.format_table(report))
        summary = {k: v for k, v in report.items() if k != "per_question"}
        if json_out:
            Path(json_out).write_text(json.dumps(report, indent=2, default=str))
            self.stderr.write(f"full report written to {json_out}")
        if figures_path:
            root = Path(settings.BASE_DIR)
            path = Path(figures_path) if Path(figures_path).is_absolute() else root / figures_path
            readme = root / "README.md" if path == root / FIGURES_FILE else None
            figures_record(command, command=command, rows=evaluation_rows(report), path=path, readme=readme)
            self.stderr.write(f"figures written to {path}")
        self.stdout.write(json.dumps(summary, default=str))
