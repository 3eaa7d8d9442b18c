"""Mirror a folder into the index: new files added, changed files re-indexed, removed files
deleted, unchanged files untouched; a progress bar and a summary.

    manage.py sync_folder ./shared/handbook --tag handbook [--tag public] [--user alice] [--tenant default]
    manage.py sync_folder --configured      # every folder of RAGCHAT_SYNC_FOLDERS ("PATH=tag,tag;...")

Runs ingestion in this process, so in embedded mode run it while the server is stopped (the server
syncs the configured folders itself on its schedule).
"""

from __future__ import annotations

import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from documents import services
from documents.folders import FolderRefused, FolderSummary, configured_folders, folder_files, folder_sync
from documents.management.commands._indexing import close_vector_store, on_one_event_loop, open_vector_store
from documents.models import Tag


class Command(BaseCommand):
    help = "Mirror a folder into the index (added, changed, removed, unchanged files), with the given tags."
    mirror = True

    def add_arguments(self, parser):
        parser.add_argument("folder", nargs="?")
        parser.add_argument("--tag", action="append", dest="tags", default=[], help="tag slug (repeatable)")
        parser.add_argument("--user", help="uploader (username); default: the first superuser")
        parser.add_argument("--tenant", default="default")
        parser.add_argument("--create-tags", action="store_true", help="create missing tags")
        if self.mirror:
            parser.add_argument("--configured", action="store_true", help="sync every folder of RAGCHAT_SYNC_FOLDERS")

    def handle(self, *args, folder, tags, user, tenant, create_tags, configured=False, **options):
        if configured:
            jobs = configured_folders()
            if not jobs:
                raise CommandError("RAGCHAT_SYNC_FOLDERS names no folder.")
        elif folder:
            if not tags:
                raise CommandError("Name at least one --tag: tags decide who can read the documents.")
            jobs = [(Path(folder), tags)]
        else:
            raise CommandError("Name a folder (or --configured).")
        uploader = self._uploader(user, tenant)
        plans = []
        for path, slugs in jobs:  # every folder and tag is checked before anything is indexed
            try:
                files = folder_files(Path(path))
            except FolderRefused as e:
                raise CommandError(str(e)) from e
            plans.append((Path(path), files, self._tags(slugs, tenant, create_tags)))
        quiet = options.get("verbosity", 1) == 0

        def run() -> None:
            open_vector_store()
            try:
                for path, files, tag_objects in plans:
                    self._sync(path, files, tag_objects, uploader, quiet=quiet)
            finally:
                close_vector_store()

        on_one_event_loop(run)

    def _sync(self, path, files, tags, uploader, *, quiet):
        started = time.perf_counter()
        with tqdm(total=len(files), unit="file", desc=f"Syncing {path.name or path}", disable=quiet) as bar:

            def on_file(file):
                bar.set_postfix_str(file.name[:30])
                bar.update(1)

            summary = folder_sync(path, tags=tags, uploader=uploader, mirror=self.mirror, on_file=on_file, files=files)
        for problem in summary.problems:
            self.stderr.write(problem)
        self.stdout.write(self.style.SUCCESS(self.summary_line(path, summary, time.perf_counter() - started)))

    def summary_line(self, path, summary: FolderSummary, elapsed: float) -> str:
        return f"{path} in {elapsed:.1f} s: {summary.line()}"

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
        if not found:
            raise CommandError("Name at least one tag: tags decide who can read the documents.")
        return found
