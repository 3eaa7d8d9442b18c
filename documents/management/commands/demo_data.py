"""Idempotent demo: an admin, two tag owners, two employees (credentials printed), tags with owners
and members, and the Brightwater Tools corpus (handbook, IT, finance) ingested. Safe to run at every
start (`make run` does): what exists is kept; documents already present are not indexed again.

Runs ingestion in this process, so in embedded mode run it while the server is stopped.
"""

from __future__ import annotations

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from documents import services
from documents.demo_corpus import demo_files
from documents.management.commands._indexing import (
    close_vector_store,
    on_one_event_loop,
    open_vector_store,
)
from documents.models import Document

TENANT = "default"
# (username, first, last, email, password, role); passwords are for a local demo only.
PEOPLE = [
    ("admin", "Ada", "Admin", "admin@brightwater.example", "admin-demo-2026", "admin"),
    ("fiona", "Fiona", "Finch", "fiona@brightwater.example", "fiona-demo-2026", "owner"),
    ("ivan", "Ivan", "Iverson", "ivan@brightwater.example", "ivan-demo-2026", "owner"),
    ("emma", "Emma", "Evans", "emma@brightwater.example", "emma-demo-2026", "employee"),
    ("noah", "Noah", "Norris", "noah@brightwater.example", "noah-demo-2026", "employee"),
]
# slug: (name, owner, members, description)
TAGS = {
    "handbook": ("Handbook", "fiona", ["emma", "noah", "ivan"], "Employee handbook: hours, leave, conduct."),
    "finance": ("Finance", "fiona", ["noah"], "Expenses, travel, purchasing, invoices."),
    "it": ("IT", "ivan", ["emma"], "IT security, devices, helpdesk."),
}


class Command(BaseCommand):
    help = "Create demo users, tags and a small fictional-company corpus (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--no-documents", action="store_true", help="users and tags only")

    def handle(self, *args, no_documents=False, **options):
        if os.environ.get("RAGCHAT_SKIP_DEMO_DATA", "").lower() in {"1", "true", "yes"}:
            self.stdout.write("RAGCHAT_SKIP_DEMO_DATA is set: no demo data.")
            return
        with transaction.atomic():
            users, created = self._people()
            tags = self._tags(users)
        if not no_documents:
            self._documents(users["admin"], tags)
        self._print_credentials(created)

    def _people(self):
        User = get_user_model()
        users, created = {}, []
        for username, first, last, email, password, role in PEOPLE:
            user = User.objects.filter(username=username).first()
            if user is None:
                user = User(username=username, first_name=first, last_name=last, email=email, tenant_id=TENANT)
                user.is_superuser = user.is_staff = role == "admin"
                user.set_password(password)
                user.save()
                created.append(username)
            users[username] = user
        return users, created

    def _tags(self, users):
        tags = {"public": services.tag_ensure_public(tenant_id=TENANT)}
        for slug, (name, owner, members, description) in TAGS.items():
            tag = services.tag_create(
                tenant_id=TENANT,
                name=name,
                slug=slug,
                owner=users[owner],
                description=description,
                members=[users[m] for m in members],
            )
            tags[slug] = tag
        if tags["public"].owner_id is None:
            tags["public"].owner = users["admin"]
            tags["public"].save(update_fields=["owner"])
        return tags

    def _documents(self, admin, tags):
        files = demo_files()
        missing = [
            f for f in files if not Document.objects.filter(tenant_id=TENANT, original_filename=f.filename).exists()
        ]
        if not missing:
            self.stdout.write(f"Demo documents: all {len(files)} present.")
            return

        def ingest() -> None:
            open_vector_store()
            try:
                for demo in missing:
                    try:
                        document = services.document_create(
                            user=admin,
                            data=demo.data,
                            filename=demo.filename,
                            tags=[tags[slug] for slug in demo.tags],
                            check_permissions=False,
                        )
                    except services.DuplicateDocument:
                        continue
                    result = services.document_ingest_sync(document.id)
                    state = f"{result.chunk_count} chunks" if result.status == "ready" else f"FAILED: {result.error}"
                    self.stdout.write(f"  {demo.filename} [{', '.join(demo.tags)}]: {state}")
            finally:
                close_vector_store()

        on_one_event_loop(ingest)  # one loop for every document (_indexing.on_one_event_loop)
        self.stdout.write(f"Demo documents: {len(missing)} ingested, {len(files) - len(missing)} already present.")

    def _print_credentials(self, created):
        self.stdout.write("Demo accounts (local demo only; change or remove them for real use):")
        for username, first, last, _email, password, _role in PEOPLE:
            detail = {
                "admin": "admin: every tag, Django admin",
                "fiona": "owns Finance and Handbook",
                "ivan": "owns IT",
                "emma": "employee: IT, Handbook, Public",
                "noah": "employee: Finance, Handbook, Public",
            }[username]
            note = "" if username in created else " (existing account; password as created)"
            self.stdout.write(f"  {username:<6} / {password:<16} {first} {last} - {detail}{note}")
