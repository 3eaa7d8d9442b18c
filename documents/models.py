"""Tags (who may read what) and documents (an uploaded original and the state of its indexing).

A document's chunks live in Qdrant with payload `tags` = the slugs of its tags, `tenant_id` and
`document_id` = str(Document.id); the database is the source of truth for which tags a user holds.

References: requirement IDs (R-…): docs/requirements.md.
"""

import uuid
from datetime import timedelta
from pathlib import PurePosixPath

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower

from ragchat.services.glossary import GlossaryEntry, parse_aliases
from ragchat.services.vector_store import PUBLIC_TAG

# The tag every signed-in user of a tenant holds: the core's access rule defines it.
PUBLIC_TAG_SLUG = PUBLIC_TAG

# Ingestion saves progress after every batch; this long without a save means nobody is working on it.
STALE_AFTER = timedelta(minutes=10)


class Tag(models.Model):
    """A topic and access group. Members read it; the owner answers routed questions and may upload to it."""

    tenant_id = models.CharField(max_length=64, default="default", db_index=True)
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=100, help_text="Stored with every chunk; unique per tenant.")
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_tags",
    )
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="member_tags")
    # The knowledge loop (issue 13): how long a verified answer stays verified before it is due for
    # review, and how long a question or review item may wait before its owner is reminded.
    review_days = models.PositiveIntegerField(
        default=180, help_text="Verified answers on this tag are due for review after this many days."
    )
    target_hours = models.PositiveIntegerField(
        default=48, help_text="Questions and review items should be answered within this many hours."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant_id", "slug"], name="tag_unique_slug_per_tenant")]

    def __str__(self) -> str:
        return self.name


class GlossaryTerm(models.Model):
    """A term of a tag's glossary and its aliases (other names, spellings, acronyms): a question that
    names one of them is also searched with the others (ragchat.services.glossary)."""

    tenant_id = models.CharField(max_length=64, default="default", db_index=True)
    tag = models.ForeignKey(Tag, on_delete=models.CASCADE, related_name="glossary_terms")
    term = models.CharField(max_length=200)
    aliases = models.TextField(blank=True, help_text='Other names for the term: one per line, or separated by ";".')
    note = models.TextField(blank=True, help_text="For the admins: what the term means, where it comes from.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["term", "pk"]
        constraints = [
            models.UniqueConstraint(
                Lower("term"),
                "tag",
                name="glossaryterm_unique_term_per_tag",
                violation_error_message="This tag already has this term (in any case).",
            )
        ]

    def __str__(self) -> str:
        return self.term

    def save(self, *args, **kwargs):
        # A term belongs to its tag's tenant, whoever saves it.
        if self.tag_id is not None:
            self.tenant_id = self.tag.tenant_id
        super().save(*args, **kwargs)

    @property
    def alias_list(self) -> tuple[str, ...]:
        return parse_aliases(self.aliases)

    def entry(self) -> GlossaryEntry:
        return GlossaryEntry(term=self.term.strip(), aliases=self.alias_list, tag=self.tag.slug)


def document_upload_to(document: "Document", filename: str) -> str:
    # The stored name is the document's id: the user's file name never becomes a path.
    extension = PurePosixPath(filename).suffix.lower()[:16]
    return f"originals/{document.tenant_id}/{document.id}{extension}"


class Document(models.Model):
    class Source(models.TextChoices):
        UPLOAD = "upload", "Upload"
        WEB = "web", "Website"
        FOLDER = "folder", "Synced folder"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        PROCESSING = "processing", "Processing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant_id = models.CharField(max_length=64, default="default", db_index=True)
    title = models.CharField(max_length=300)
    title_fixed = models.BooleanField(
        default=False, help_text="A person named the document: re-indexing keeps this title, not the file's."
    )
    original_filename = models.CharField(max_length=255)
    file = models.FileField(upload_to=document_upload_to, max_length=300)
    content_hash = models.CharField(max_length=64, help_text="SHA-256 of the original bytes.")
    mime_type = models.CharField(max_length=100, blank=True)
    kind = models.CharField(max_length=20, blank=True, help_text="pdf, docx, html, markdown or text")
    size = models.BigIntegerField(default=0)
    tags = models.ManyToManyField(Tag, related_name="documents")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="documents"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    stage = models.CharField(max_length=100, blank=True, help_text="What ingestion is doing right now.")
    progress = models.PositiveSmallIntegerField(default=0, help_text="0-100 while processing.")
    error = models.TextField(blank=True)
    pages = models.PositiveIntegerField(null=True, blank=True)
    chunk_count = models.PositiveIntegerField(default=0)
    warnings = models.JSONField(default=list, blank=True)
    version = models.PositiveIntegerField(default=1)
    # Extra payload stored with every chunk of this document and returned in Citation.metadata
    # (e.g. routing's verified knowledge: {"verified": true, "verified_by": ..., "verified_at": ...}).
    chunk_metadata = models.JSONField(default=dict, blank=True)
    # Where the document comes from: an upload, a page of a site source (its canonical URL, A5), or
    # a file of a synced folder (its absolute path).
    source_kind = models.CharField(max_length=10, choices=Source.choices, default=Source.UPLOAD, db_index=True)
    source_url = models.URLField(max_length=2000, blank=True)
    source_path = models.CharField(max_length=1000, blank=True)
    site = models.ForeignKey("SiteSource", null=True, blank=True, on_delete=models.SET_NULL, related_name="documents")
    # Pages whose text came from text recognition (scanned pages), 1-based.
    ocr_pages = models.JSONField(default=list, blank=True)
    # Marked outdated by a tag owner from a review item: the document stays searchable but is shown
    # with a warning wherever it is cited, and its uploader is told.
    outdated_at = models.DateTimeField(null=True, blank=True)
    outdated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    outdated_note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    indexed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # Same content is indexed once per tenant (R-DOC-6); the database enforces it.
            models.UniqueConstraint(fields=["tenant_id", "content_hash"], name="document_unique_hash_per_tenant"),
            # One document per canonical URL (A5), and per synced file.
            models.UniqueConstraint(
                fields=["tenant_id", "source_url"],
                condition=~models.Q(source_url=""),
                name="document_unique_url_per_tenant",
            ),
            models.UniqueConstraint(
                fields=["tenant_id", "source_path"],
                condition=~models.Q(source_path=""),
                name="document_unique_path_per_tenant",
            ),
        ]
        indexes = [models.Index(fields=["tenant_id", "status"])]

    def __str__(self) -> str:
        return self.title

    @property
    def document_id(self) -> str:
        """The id carried by chunks and citations: the lowercase UUIDv4 string."""
        return str(self.id)

    @property
    def is_busy(self) -> bool:
        return self.status in {self.Status.QUEUED, self.Status.PROCESSING}

    @property
    def is_stale(self) -> bool:
        """Busy without a sign of life for STALE_AFTER: its worker (or the server) stopped; may be retried."""
        from django.utils import timezone

        return self.is_busy and self.updated_at is not None and timezone.now() - self.updated_at > STALE_AFTER


class SiteSource(models.Model):
    """A website a tag owner imports: where the crawler starts, which domains it may enter (A4),
    how far it goes, and how often it comes back."""

    tenant_id = models.CharField(max_length=64, default="default", db_index=True)
    name = models.CharField(max_length=200)
    tag = models.ForeignKey(Tag, on_delete=models.PROTECT, related_name="site_sources")
    start_urls = models.JSONField(default=list)
    allowed_domains = models.JSONField(default=list)
    max_pages = models.PositiveIntegerField(default=100)
    max_depth = models.PositiveSmallIntegerField(default=3)
    include_patterns = models.JSONField(default=list, blank=True)
    exclude_patterns = models.JSONField(default=list, blank=True)
    recrawl_hours = models.PositiveIntegerField(default=0, help_text="0: only when started by hand.")
    next_crawl_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="site_sources"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class CrawlRun(models.Model):
    """One crawl of a site source, with its live counts."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    site = models.ForeignKey(SiteSource, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    stage = models.CharField(max_length=300, blank=True)
    pages = models.PositiveIntegerField(default=0, help_text="pages fetched and taken")
    added = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    removed = models.PositiveIntegerField(default=0)
    refused = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0, help_text="pages taken whose indexing failed")
    seconds = models.FloatField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def is_busy(self) -> bool:
        return self.status in {self.Status.QUEUED, self.Status.RUNNING}


class CrawlRefusal(models.Model):
    """A URL a crawl did not take, and why (robots.txt, allowlist, SSRF, size, type, 404, loop, …)."""

    run = models.ForeignKey(CrawlRun, on_delete=models.CASCADE, related_name="refusals")
    url = models.CharField(max_length=2000)
    reason = models.CharField(max_length=500)
    kind = models.CharField(max_length=10, default="refused")  # refused | gone | transient | duplicate

    class Meta:
        ordering = ["pk"]


class IngestionWorker(models.Model):
    """A running `manage.py ingest_worker` process and its last heartbeat (documents/workers.py).
    A worker whose heartbeat is older than RAGCHAT_WORKER_STALE_SECONDS is taken for dead: the
    ingestion it was running is resumed by the other workers, or by the next one to start."""

    worker_id = models.CharField(max_length=64, primary_key=True)
    hostname = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-heartbeat_at"]

    def __str__(self) -> str:
        return f"{self.worker_id} ({self.hostname}:{self.pid})"
