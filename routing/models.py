"""Questions routed to a person (R-ROUTE-1..7): a low-confidence answer, or the asker's own "ask the
owner", becomes a RoutedQuestion for the primary tag's owner (or the admins when there is none).
Similar open questions on the same tag share a QuestionGroup: one answer reaches every asker.

References: requirement IDs (R-…): docs/requirements.md.
"""

from django.conf import settings
from django.db import models


class QuestionGroup(models.Model):
    """Open questions close in meaning on one tag (R-ROUTE-6). The first question is representative:
    its query and that query's embedding are what later questions are compared with."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        ANSWERED = "answered", "Answered"
        CLOSED = "closed", "Closed"

    tenant_id = models.CharField(max_length=64, default="default", db_index=True)
    tag = models.ForeignKey("documents.Tag", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    representative_query = models.TextField()
    embedding = models.JSONField(default=list, blank=True)  # unit vector of representative_query
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.representative_query[:80]


class RoutedQuestion(models.Model):
    class Status(models.TextChoices):
        OPEN = "open", "Open"
        ANSWERED = "answered", "Answered"
        CLOSED = "closed", "Closed"

    class Origin(models.TextChoices):
        ROUTE = "route", "Low confidence (automatic)"
        MANUAL = "manual", "Asked the owner"

    tenant_id = models.CharField(max_length=64, default="default", db_index=True)
    asker = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="routed_questions")
    session = models.ForeignKey("chat.ChatSession", on_delete=models.CASCADE, related_name="routed_questions")
    # The assistant answer it came from, and the asker's question it answered.
    message = models.ForeignKey("chat.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    question_message = models.ForeignKey(
        "chat.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tag = models.ForeignKey(
        "documents.Tag",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="routed_questions",
        help_text="The context's primary tag; empty when there was none.",
    )
    target = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="inbox_questions",
        help_text="The tag owner it went to; empty = the admins (fallback).",
    )
    fallback = models.BooleanField(default=False, db_index=True)
    reason = models.CharField(max_length=300, blank=True, default="")
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.ROUTE)
    question = models.TextField()
    contextual_query = models.TextField(blank=True, default="")
    # Citation-shaped dicts: what the asker was shown (cited sources, else the passages retrieved).
    citations = models.JSONField(default=list, blank=True)
    draft = models.TextField(blank=True, default="")
    confidence = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN, db_index=True)
    answer = models.TextField(blank=True, default="")
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)
    answer_message = models.ForeignKey(
        "chat.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    seen_at = models.DateTimeField(null=True, blank=True, help_text="When the asker opened the answered session.")
    group = models.ForeignKey(QuestionGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="questions")
    published_document = models.ForeignKey(
        "documents.Document", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One routed question per answer: escalating an already routed answer finds the first.
            models.UniqueConstraint(
                fields=["message"], condition=models.Q(message__isnull=False), name="routed_question_one_per_message"
            )
        ]
        indexes = [models.Index(fields=["tenant_id", "status", "created_at"])]

    @property
    def reason_for_people(self) -> str:
        """The routing reason with the tag's name where the core's rule wrote its slug ("routing to
        it owner" reads "routing to the owner of IT")."""
        reason = self.reason
        if self.tag is not None:
            slug, name = self.tag.slug, self.tag.name
            reason = reason.replace(f"routing to {slug} owner", f"routing to the owner of {name}")
            reason = reason.replace(f"tag '{slug}'", name)
        return reason

    def __str__(self) -> str:
        return self.question[:80]
