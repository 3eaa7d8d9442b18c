"""manage.py evaluate: retrieval quality on a folder and gold questions, in a scratch collection.

Without --folder, the generated evaluation corpus is written to a temporary folder and used.
With --answers: the answers themselves on the labelled set (ragchat/evaluation/answers.py), through
RAGService and the model server the settings name, or the real-model lane (--real-model).
"""

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ragchat.bench.figures import FIGURES_FILE, answer_rows, evaluation_rows, figures_record, habit_rows
from ragchat.evaluation import answers, runner
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
            "--answers",
            action="store_true",
            help="evaluate the answers end to end on the labelled set (citations, grounding, routing, seconds)",
        )
        parser.add_argument("--answer-set", help=f"labelled questions JSONL; default: {answers.ANSWER_SET.name}")
        parser.add_argument(
            "--sample",
            type=int,
            default=0,
            help="with --answers: N questions spread evenly over the labelled set (bounds a slow model's run)",
        )
        parser.add_argument(
            "--real-model",
            action="store_true",
            help="with --answers: start the real-model lane's server (make llm-lane) and answer with it",
        )
        parser.add_argument(
            "--test-server",
            metavar="HABITS",
            help="with --answers: answer with the Ollama-protocol test server's careful model, in each"
            " citation habit named (comma-separated; `every`: all of them, and the canonical marker)",
        )
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
        if options["answers"]:
            figures = None if no_figures else figures or (None if options["answer_set"] else str(FIGURES_FILE))
            if options["test_server"]:
                if options["real_model"]:
                    raise CommandError("--real-model or --test-server: one model at a time")
                return self.test_server_answers(
                    options["test_server"], options["answer_set"], json_out, limit, options["sample"], figures
                )
            return self.answers(
                options["answer_set"], options["real_model"], json_out, limit, options["sample"], figures=figures
            )
        if options["real_model"] or options["test_server"]:
            raise CommandError("--real-model and --test-server evaluate answers: give --answers too")
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
        temp = None
        with _pipeline_logs_quiet():
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
                if temp:
                    shutil.rmtree(temp, ignore_errors=True)
        self.stdout.write(runner.format_table(report))
        summary = {k: v for k, v in report.items() if k != "per_question"}
        if json_out:
            Path(json_out).write_text(json.dumps(report, indent=2, default=str))
            self.stderr.write(f"full report written to {json_out}")
        if figures_path:
            self._record(figures_path, command, evaluation_rows(report))
        self.stdout.write(json.dumps(summary, default=str))

    def answers(self, answer_set, real_model, json_out, limit, sample=0, figures=None):
        from ragchat.services.config import RAGSettings

        questions = self._labelled_questions(answer_set, limit, sample)
        server = None
        with _pipeline_logs_quiet():
            try:
                base = settings.RAG
                if real_model:
                    from ragchat import real_model as lane

                    reason = lane.missing()
                    if reason:
                        raise CommandError(reason)
                    server = lane.RealModelServer().start()
                    self.stderr.write(
                        f"{lane.MODEL_NAME} served at {server.url}, ready in {server.started_seconds:.1f} s"
                    )
                    base = RAGSettings.from_env({**os.environ, **server.environment()})
                began = time.perf_counter()
                report = async_to_sync(answers.run_answer_evaluation)(
                    questions=questions, base_settings=base, progress=lambda m: self.stderr.write(m)
                )
                report["lane_seconds"] = round(time.perf_counter() - began, 1)
                if server is not None:
                    report["server_start_seconds"] = round(server.started_seconds, 1)
            finally:
                if server is not None:
                    server.stop()
        self.stdout.write(answers.format_answer_report(report))
        if json_out:
            Path(json_out).write_text(json.dumps(report, indent=2, default=str))
            self.stderr.write(f"full report written to {json_out}")
        if figures and not report["summary"].get("failed"):
            command = _answers_command(["--real-model"] if real_model else [], limit, sample)
            self._record(figures, command, answer_rows(report))
        self.stdout.write(json.dumps(report["summary"], default=str))

    def test_server_answers(self, habits_arg, answer_set, json_out, limit, sample, figures):
        """The labelled set answered by the test server's careful model (the context sentence closest
        to the question) in each citation habit named: one report a habit."""
        from ragchat.fake_ollama import FakeOllama
        from ragchat.fake_ollama.server import CITATION_HABITS, NO_CITATIONS

        every = ["canonical", *sorted(CITATION_HABITS)]
        habits = every if habits_arg == "every" else [h.strip() for h in habits_arg.split(",") if h.strip()]
        unknown = [h for h in habits if h not in every]
        if unknown or not habits:
            raise CommandError(f"--test-server {habits_arg!r}: name habits of {', '.join(every)}, or `every`")
        questions = self._labelled_questions(answer_set, limit, sample)
        reports: dict[str, dict] = {}
        fake = FakeOllama().start()
        with _pipeline_logs_quiet():
            try:
                base = replace(settings.RAG, llm_provider="ollama", ollama_base_url=fake.url)
                for habit in habits:
                    fake.reset()
                    fake.reply_from_context(cite=habit != NO_CITATIONS)
                    if habit != "canonical":
                        fake.habits(citations=habit)
                    self.stderr.write(f"habit {habit}:")
                    reports[habit] = async_to_sync(answers.run_answer_evaluation)(
                        questions=questions, base_settings=base, progress=lambda m: self.stderr.write(m)
                    )
            finally:
                fake.stop()
        for habit, report in reports.items():
            self.stdout.write(f"== test server, habit {habit}")
            self.stdout.write(answers.format_answer_report(report))
        if json_out:
            Path(json_out).write_text(json.dumps({"habits": reports}, indent=2, default=str))
            self.stderr.write(f"full report written to {json_out}")
        if figures and not any(r["summary"].get("failed") for r in reports.values()):
            self._record(figures, _answers_command([f"--test-server {habits_arg}"], limit, sample), habit_rows(reports))
        self.stdout.write(json.dumps({h: r["summary"] for h, r in reports.items()}, default=str))

    @staticmethod
    def _labelled_questions(answer_set, limit, sample) -> list:
        """The labelled set (the shipped one unless `answer_set`), its first `limit` or a `sample`."""
        try:
            questions = answers.load_answer_set(answer_set or answers.ANSWER_SET)
        except (OSError, ValueError) as e:
            raise CommandError(f"cannot read the labelled set: {e}")
        if limit:
            questions = questions[:limit]
        if sample:
            questions = answers.spread(questions, sample)
        return questions

    def _record(self, figures_path: str, command: str, rows: list[dict[str, str]]) -> None:
        """This command line's section of the figures file (and the README rows quoting it)."""
        root = Path(settings.BASE_DIR)
        path = Path(figures_path) if Path(figures_path).is_absolute() else root / figures_path
        readme = root / "README.md" if path == root / FIGURES_FILE else None
        figures_record(command, command=command, rows=rows, path=path, readme=readme)
        self.stderr.write(f"figures written to {path}")


@contextmanager
def _pipeline_logs_quiet() -> Iterator[None]:
    """The pipeline's per-request INFO logs off while a run prints its table (the forged citations
    the citation check injects are logged as warnings by design); the level is restored after, as
    call_command (tests) must not silence the process."""
    quiet = logging.getLogger("ragchat")
    previous_level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        yield
    finally:
        quiet.setLevel(previous_level)


def _answers_command(options: list[str], limit: int, sample: int) -> str:
    """The command line of an answers run, as its figures section is named."""
    return " ".join(
        ["manage.py evaluate --answers", *options]
        + ([f"--limit {limit}"] if limit else [])
        + ([f"--sample {sample}"] if sample else [])
    )
