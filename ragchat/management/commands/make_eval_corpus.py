"""manage.py make_eval_corpus <dir>: write the evaluation corpus and its gold questions."""

from django.core.management.base import BaseCommand

from ragchat.evaluation.corpus import DOCUMENTS, QUESTIONS, write_corpus


class Command(BaseCommand):
    help = "Write the generated evaluation corpus (documents in tag subfolders + questions.jsonl) to a folder."

    def add_arguments(self, parser):
        parser.add_argument("folder")

    def handle(self, *args, folder, **options):
        root, questions = write_corpus(folder)
        self.stdout.write(
            f"wrote {len(DOCUMENTS)} documents under {root} and {len(QUESTIONS)} questions to {questions}"
        )
