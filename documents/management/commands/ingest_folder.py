"""Ingest every file of a folder (recursively) with a progress bar and a final summary.

    manage.py ingest_folder ./docs --tag finance --tag public [--user alice] [--tenant default]

Runs ingestion in this process, so in embedded mode run it while the server is stopped.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from documents import services
from documents.management.commands._indexing import (
    close_vector_store,
    open_vector_store,
)
from documents.models import Tag


class Command(BaseCommand):
    help = "Ingest every file of a folder into the index, with the given tags."

    def add_arguments(self, parser):
        parser.add_argument("folder")
        parser.add_argument("--tag", action="append", dest="tags", required=True, help="tag slug (repeatable)")
        parser.add_argument("--user", help="uploader (username); default: the first superuser")
        parser.add_argument("--tenant", default="default")
        parser.add_argument("--create-tags", action="store_true", help="create missing tags")

    def handle(self, *args, folder, tags, user, tenant, create_tags, **options):
        root = Path(folder)
        if not root.is_dir():
            raise CommandError(f"{folder} is not a folder.")
        uploader = self._uploader(user, tenant)
        tag_objects = self._tags(tags, tenant, create_tags)
        files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
        if not files:
            raise CommandError(f"No files in {folder}.")
        open_vector_store()
        summary = {"indexed": 0, "duplicate": 0, "refused": 0, "failed": 0, "chunks": 0}
        problems: list[str] = []
        started = time.perf_counter()
        try:
            with tqdm(files, unit="file", desc="Ingesting", disable=options.get("verbosity", 1) == 0) as bar:
                for path in bar:
                    bar.set_postfix_str(path.name[:30])
                    self._one(path, uploader, tag_objects, summary, problems)
        finally:
            close_vector_store()
        elapsed = time.perf_counter() - started
        for problem in problems:
            self.stderr.write(problem)
        self.stdout.write(
            self.style.SUCCESS(
                f"{len(files)} files in {elapsed:.1f} s: {summary['indexed']} indexed ({summary['chunks']} chunks), "
                f"{summary['duplicate']} already present, {summary['refused']} refused, {summary['failed']} failed."
            )
        )

    def _one(self, path, uploader, tags, summary, problems):
        try:
            document = services.document_create(
                user=uploader, data=path.read_bytes(), filename=path.name, tags=tags, check_permissions=False
            )
        except services.DuplicateDocument as e:
            summary["duplicate"] += 1
            problems.append(f"skipped {path}: {e}")
            return
        except services.UploadRefused as e:
            summary["refused"] += 1
            problems.append(f"refused {path}: {e}")
            return
        result = services.document_ingest_sync(document.id)
        if result.status == "ready":
            summary["indexed"] += 1
            summary["chunks"] += result.chunk_count
        else:
            summary["failed"] += 1
            problems.append(f"failed {path}: {result.error}")

    def _uploader(self, username, tenant):
        User = get_user_model()
        if username:
            try:
                return User.objects.get(username=username)
            except User.DoesNotExist as e:
                raise CommandError(f"No user {username!r}.") from e
        user = User.objects.filter(is_superuser=True, tenant_id=tenant).order_by("pk").first()
        if user is None:
            raise CommandError("No superuser in this tenant; pass --user.")
        return user

    def _tags(self, slugs, tenant, create):
        found = []
        for slug in slugs:
            tag = Tag.objects.filter(tenant_id=tenant, slug=slug).first()
            if tag is None:
                if not create:
                    raise CommandError(f"No tag {slug!r} in tenant {tenant!r} (use --create-tags).")
                tag = services.tag_create(tenant_id=tenant, name=slug.replace("-", " ").title(), slug=slug)
            found.append(tag)
        return found
