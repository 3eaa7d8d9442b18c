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


# What the reason of a review item (a down-voted answer, origin FEEDBACK) begins with.
REVIEW_REASON_PREFIX = "Review: "


class RoutedQuestion(models.Model):
    class Status(models.TextChoices):
        OPEN = "open", "Open"
        ANSWERED = "answered", "Answered"
        CLOSED = "closed", "Closed"

    class Origin(models.TextChoices):
        ROUTE = "route", "Low confidence (automatic)"
        MANUAL = "manual", "Asked the owner"
        FEEDBACK = "feedback", "Down-voted answer"  # a review item (issue 13)

    class Resolution(models.TextChoices):
        NONE = "", "—"
        ANSWERED = "answered", "Answered"
        CORRECTED = "corrected", "Corrected"
        OUTDATED = "outdated", "Source marked outdated"
        DISMISSED = "dismissed", "Dismissed"

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
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.ROUTE, db_index=True)
    # A review item (origin FEEDBACK) comes from a down vote; a routed question carries the asker's
    # down vote on its draft (one question, one item). How the owner resolved it, and their note.
    feedback = models.ForeignKey(
        "chat.AnswerFeedback", null=True, blank=True, on_delete=models.SET_NULL, related_name="review_items"
    )
    resolution = models.CharField(max_length=16, choices=Resolution.choices, blank=True, default="")
    resolution_note = models.TextField(blank=True, default="")
    reminded_at = models.DateTimeField(null=True, blank=True, help_text="When its owner was last reminded.")
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
            # A review item (from a down vote) is not a routed question: it has its own rule.
            models.UniqueConstraint(
                fields=["message"],
                condition=models.Q(message__isnull=False) & ~models.Q(origin="feedback"),
                name="routed_question_one_per_message",
            ),
            models.UniqueConstraint(
                fields=["feedback"], condition=models.Q(feedback__isnull=False), name="review_item_one_per_feedback"
            ),
        ]
        indexes = [models.Index(fields=["tenant_id", "status", "created_at"])]

    @property
    def reason_for_people(self) -> str:
        """Why it came to its owner, as the person reads it while it waits: the routing reason with
        the tag's name where the core's rule wrote its slug ("routing to it owner" reads "routing to
        the owner of IT"). A review item reads as one ("Sent to the owner of IT for review"), not
        as the routing notice it was built with."""
        return self._reason_text(settled=False)

    @property
    def reason_settled(self) -> str:
        """The same once it is answered or closed: where it went, not where it is going ("Low
        confidence: 35% - sent to the owner of IT")."""
        return self._reason_text(settled=True)

    def _reason_text(self, *, settled: bool) -> str:
        reason = self.reason
        review = self.origin == self.Origin.FEEDBACK and reason.startswith(REVIEW_REASON_PREFIX)
        if review:
            reason = reason[len(REVIEW_REASON_PREFIX) :]
        if self.tag is not None:
            slug, name = self.tag.slug, self.tag.name
            reason = reason.replace(f"routing to {slug} owner", f"routing to the owner of {name}")
            reason = reason.replace(f"Routing to {slug} owner", f"Routing to the owner of {name}")
            reason = reason.replace(f"tag '{slug}'", name)
        if settled or review:
            reason = reason.replace("routing to admin", "sent to the administrators")
            reason = reason.replace("routing to", "sent to").replace("Routing to", "Sent to")
        return f"{reason} for review" if review else reason

    def __str__(self) -> str:
        return self.question[:80]


class VerifiedAnswer(models.Model):
    """Verified knowledge (issue 13): a published answer, who verified it and when, the documents it
    relied on (with the version each had), and when it is due for review. It is cited as verified
    only while VERIFIED; a relied-on document replaced or deleted, or the review date passing, makes
    it NEEDS_REVIEW (and it appears in the owner's re-verify queue)."""

    class Status(models.TextChoices):
        VERIFIED = "verified", "Verified"
        NEEDS_REVIEW = "needs_review", "Needs review"
        RETIRED = "retired", "Retired"

    tenant_id = models.CharField(max_length=64, default="default", db_index=True)
    tag = models.ForeignKey("documents.Tag", on_delete=models.CASCADE, related_name="verified_answers")
    question = models.TextField()
    answer = models.TextField()
    # The published document that carries it into retrieval (its chunks' metadata says verified).
    document = models.OneToOneField(
        "documents.Document", null=True, blank=True, on_delete=models.SET_NULL, related_name="verified_answer"
    )
    source_question = models.ForeignKey(
        RoutedQuestion, null=True, blank=True, on_delete=models.SET_NULL, related_name="verified_answers"
    )
    verified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verified_at = models.DateTimeField()
    review_by = models.DateField(help_text="After this date it needs review (the tag's review_days by default).")
    relied_on = models.ManyToManyField("documents.Document", blank=True, related_name="relying_verified_answers")
    # {document_id: {"title": ..., "version": n}} as verified: tells a replaced or deleted source.
    relied_on_versions = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.VERIFIED, db_index=True)
    needs_review_reason = models.CharField(max_length=300, blank=True, default="")
    needs_review_since = models.DateTimeField(null=True, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-verified_at", "-id"]
        indexes = [models.Index(fields=["tenant_id", "status", "review_by"])]

    def __str__(self) -> str:
        return self.question[:80]


class NotificationPreference(models.Model):
    """What one person receives by email (issue 13). No row = the defaults below."""

    class Digest(models.TextChoices):
        OFF = "off", "No digest"
        DAILY = "daily", "Daily digest"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_pref")
    email_questions = models.BooleanField(default=True, help_text="New questions routed to me.")
    email_reviews = models.BooleanField(
        default=True, help_text="New review items (down-voted answers), re-verify items."
    )
    email_reminders = models.BooleanField(default=True, help_text="Reminders for items waiting past the tag's target.")
    email_answers = models.BooleanField(default=True, help_text="Answers and corrections to my questions.")
    digest = models.CharField(max_length=8, choices=Digest.choices, default=Digest.OFF)
    last_digest_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"notifications of {self.user_id}"
