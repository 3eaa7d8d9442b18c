"""manage.py seed_activity: a labelled, deterministic month of activity on the demo data, whose
figures the knowledge-gap report shows."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from chat.models import AnswerFeedback, ChatSession, Message
from documents.models import Document
from routing import figures
from routing.models import RoutedQuestion, VerifiedAnswer

pytestmark = pytest.mark.django_db


def _figures(now):
    admin = get_user_model().objects.get(username="admin")
    out = {}
    for slug, _ in figures.figure_tags(user=admin):
        tag = figures.report_tag(user=admin, slug=slug)
        r = figures.tag_report(user=admin, tag=tag, since=now - timedelta(days=31), until=now)
        out[slug] = (
            r.asked,
            r.outcomes,
            r.median_seconds,
            r.p90_seconds,
            r.votes,
            r.down_votes,
            [(g.question.question, g.people, g.asked) for g in r.unanswered],
            [(c.document.title, c.answers) for c in r.cited],
            [d.title for d in r.never_cited],
        )
    return out


def test_seed_activity_is_labelled_deterministic_and_feeds_the_report(rag_runtime, django_capture_on_commit_callbacks):
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):  # the published answers are indexed on commit
        call_command("seed_activity", "--days", "30", stdout=out)  # runs demo_data first on an empty database
    assert "Seeded demo activity over 30 days" in out.getvalue()
    seeded = ChatSession.objects.filter(title__startswith="Seeded demo · ")
    assert seeded.count() > 200
    assert not Message.objects.filter(role="assistant").exclude(model="seeded-demo-activity").exists()
    assert all(q.reason.startswith("Seeded demo activity") for q in RoutedQuestion.objects.all())
    published = VerifiedAnswer.objects.select_related("document")
    assert published.count() == 5 and all(v.document.status == Document.Status.READY for v in published)
    assert AnswerFeedback.objects.filter(vote=-1).exists() and AnswerFeedback.objects.filter(vote=1).exists()
    # One question, one item: a down-voted routed draft carries the vote, with no review item beside it.
    routed = RoutedQuestion.objects.exclude(origin="feedback")
    assert routed.filter(feedback__vote=-1).exists()
    assert not RoutedQuestion.objects.filter(origin="feedback", message__in=routed.values("message")).exists()

    now = timezone.now()
    first = _figures(now)
    assert set(first) == {"finance", "handbook", "it", ""}
    for slug, (asked, outcomes, median, p90, votes, down, unanswered, cited, _never) in first.items():
        assert asked == sum(outcomes.values()) > 10, slug
        assert outcomes["routed"] > 0 and votes >= down
        assert all(people <= asked_times for _, people, asked_times in unanswered)
        if slug:
            assert outcomes["verified"] > 0 and median is not None and p90 >= median, slug
            assert cited and cited[0][1] >= cited[-1][1]
    assert first["finance"][8] == ["Purchasing and invoices"]  # nobody asks about purchasing
    assert any(people > 1 for _, people, _ in first["handbook"][6])  # groups of several people

    with pytest.raises(CommandError, match="--reset"):
        call_command("seed_activity", stdout=io.StringIO())
    if timezone.now().replace(minute=0, second=0, microsecond=0) == now.replace(minute=0, second=0, microsecond=0):
        with django_capture_on_commit_callbacks(execute=True):
            call_command("seed_activity", "--reset", stdout=io.StringIO())
        assert _figures(now) == first
        assert VerifiedAnswer.objects.count() == 5
