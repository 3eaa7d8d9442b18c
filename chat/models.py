"""Chat sessions and their messages. A session belongs to one user; its messages are the history
passed (token budgeted) to the RAG core and rendered server-side on the session page.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

import uuid
from typing import Any

from django.conf import settings
from django.db import models, transaction

DEFAULT_TITLE = "New chat"


class ChatSession(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions")
    title = models.CharField(max_length=120, default=DEFAULT_TITLE)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    pinned_at = models.DateTimeField(null=True, blank=True, help_text="Pinned chats head the list.")
    archived_at = models.DateTimeField(null=True, blank=True, help_text="Archived chats leave the list.")

    class Meta:
        ordering = ["-updated_at", "-created_at"]

    def __str__(self) -> str:
        return self.title


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"
        OWNER = "owner", "Owner"  # a human answer (tag owner or admin), delivered by routing

    class Status(models.TextChoices):
        STREAMING = "streaming", "Streaming"
        COMPLETE = "complete", "Complete"
        INTERRUPTED = "interrupted", "Interrupted"  # generation failed after some text streamed
        FAILED = "failed", "Failed"  # generation failed before any text

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    # The answer's citations (spec v3 Citation fields, as dicts), in order of first use.
    citations = models.JSONField(default=list, blank=True)
    # The passages retrieved for the turn (Citation-shaped dicts): shown as search results when
    # generation failed, and used to resolve markers in a partial answer.
    passages = models.JSONField(default=list, blank=True)
    # {"overall": int, "retrieval": float, "coverage": float, "llm": int} or {} (no score).
    confidence = models.JSONField(default=dict, blank=True)
    action = models.CharField(max_length=8, blank=True, default="")  # CITE / ROUTE / ""
    route_target = models.JSONField(null=True, blank=True)  # spec v3 RouteTarget as a dict
    model = models.CharField(max_length=120, blank=True, default="")
    query_strategy = models.CharField(max_length=80, blank=True, default="")
    retrieval_query = models.TextField(blank=True, default="")
    # The per-sentence grounding check (ragchat/services/grounding.py GroundingReport.as_dict()):
    # claims, supported, cited_supported, supported_share, sentences (offsets into content, status).
    grounding = models.JSONField(default=dict, blank=True)
    timings = models.JSONField(default=dict, blank=True)  # per-stage ms: embed, search, generate, rate, total
    request_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    error = models.TextField(blank=True, default="")  # the sentence shown to the user
    error_type = models.CharField(max_length=64, blank=True, default="")  # exception class, for ops
    # For an owner/assistant answer: the author (owner answers), and the user message it answers.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reply_to = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replies")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Derived from citations on every save (answer_sources): the report counts in the database.
    cites_verified = models.BooleanField(default=False, editable=False)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            # A chat's messages in order; its trailing columns make it cover the knowledge-gap
            # report's count of a period's answers (routing.figures), which then never reads a row.
            models.Index(
                fields=[
                    "session",
                    "created_at",
                    "role",
                    "status",
                    "cites_verified",
                    "query_strategy",
                    "reply_to",
                    "id",
                ],
                name="message_by_session",
            )
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"

    def save(self, *args, **kwargs):
        """A complete answer's documents are written to AnswerSource with it: the knowledge-gap
        report (routing.figures) counts answers by their documents' tags in the database, which
        the JSON of passages and citations does not allow at a million messages."""
        fields = kwargs.get("update_fields")
        if fields is not None and not ({"citations", "passages", "status", "role"} & set(fields)):
            return super().save(*args, **kwargs)  # what the sources are made of is not written
        sources, self.cites_verified = answer_sources(citations=self.citations, passages=self.passages)
        if fields is not None:
            kwargs["update_fields"] = {*fields, "cites_verified"}
        adding = self._state.adding
        if self.role != self.Role.ASSISTANT:
            return super().save(*args, **kwargs)
        with transaction.atomic():
            super().save(*args, **kwargs)
            if not adding:
                AnswerSource.objects.filter(message=self).delete()
            if self.status == self.Status.COMPLETE and sources:
                AnswerSource.objects.bulk_create(
                    AnswerSource(message=self, document_id=doc, cited=cited) for doc, cited in sources.items()
                )


def answer_sources(*, citations: Any, passages: Any) -> tuple[dict[uuid.UUID, bool], bool]:
    """The documents an answer used (a passage in its prompt, or cited), each with whether it was
    cited, and whether it cited verified knowledge (a citation's metadata says `verified`)."""
    cited_items = [c for c in (citations or []) if isinstance(c, dict)]
    used: dict[uuid.UUID, bool] = {}
    for item in [*(p for p in (passages or []) if isinstance(p, dict)), *cited_items]:
        doc = _uuid(item.get("document_id"))
        if doc is not None:
            used.setdefault(doc, False)
    for c in cited_items:
        doc = _uuid(c.get("document_id"))
        if doc is not None:
            used[doc] = True
    verified = any(isinstance(c.get("metadata"), dict) and c["metadata"].get("verified") for c in cited_items)
    return used, bool(verified)


def _uuid(value: Any) -> uuid.UUID | None:
    """A document's id, or None: a passage of no document (web search) has none to count."""
    if not value:
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


class AnswerSource(models.Model):
    """A document a complete answer used or cited (Message.save writes them). `document_id` is no
    foreign key: an answer whose document was deleted keeps its row, which then joins no tag, as
    the JSON it is derived from does."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="sources")
    document_id = models.UUIDField()
    cited = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "document_id"], name="answer_source_once")]
        indexes = [models.Index(fields=["document_id", "message"], name="answer_source_by_document")]


class AnswerFeedback(models.Model):
    """One person's vote on one answer (issue 13). A down vote carries a reason and an optional
    comment; with a reason it becomes a review item in the tag owner's inbox (a RoutedQuestion of
    origin FEEDBACK)."""

    class Vote(models.IntegerChoices):
        UP = 1, "Helpful"
        DOWN = -1, "Not helpful"

    class Reason(models.TextChoices):
        WRONG = "wrong", "Wrong"
        OUTDATED = "outdated", "Outdated"
        INCOMPLETE = "incomplete", "Incomplete"
        OFF_TOPIC = "off_topic", "Not what I asked"

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="feedback")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="answer_feedback")
    vote = models.SmallIntegerField(choices=Vote.choices)
    reason = models.CharField(max_length=16, choices=Reason.choices, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["message", "user"], name="feedback_one_per_person_and_answer")]

    def __str__(self) -> str:
        return f"{self.get_vote_display()} on {self.message_id}"
