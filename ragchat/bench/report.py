"""`manage.py bench` part "report": the knowledge-gap report (routing.figures.tag_report) over a
period holding 1,000,000 messages, in a scratch SQLite database (never the live one).

    python -m ragchat.bench.report --data-dir DIR [--messages N] [--repeat R]

Builds, in one transaction of raw inserts (minutes through the ORM, seconds this way): 20 tags of
10 documents each, 1,000 people with a chat each, N messages (half questions, half answers) spread
over the last 89 days; every answer used 3 passages of documents of one or two tags and cited
1 or 2 of them, 1 in 20 cites verified knowledge (the rows Message.save writes: AnswerSource and
`cites_verified`, written here directly); 2,000 routed questions, votes on 5 % of the answers. Then
times the report of the 90-day window R times for one tag and for "no tag" (as an admin sees it)
and prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
import uuid
from datetime import timedelta
from pathlib import Path

TAGS = 20
DOCS_PER_TAG = 10
PEOPLE = 1_000
ROUTED = 2_000
DAYS = 89


def _row_template(model, connection, **values):
    """The database values of one instance (every column, defaults included) and the column names:
    the raw inserts vary a few of them."""
    obj = model(**values)
    fields = [f for f in model._meta.concrete_fields if not f.primary_key or not f.auto_created]
    names = [f.column for f in fields]
    row = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    return names, row


def _insert(cursor, table: str, names: list[str], rows) -> None:
    cols = ", ".join(f'"{n}"' for n in names)
    marks = ", ".join(["%s"] * len(names))
    cursor.executemany(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', rows)


def build(messages: int, *, seed: int = 1) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from chat.models import AnswerFeedback, AnswerSource, ChatSession, Message
    from documents.models import Document
    from documents.services import tag_create
    from routing.models import RoutedQuestion

    rng = random.Random(seed)
    now = timezone.now()
    User = get_user_model()
    admin = User.objects.create_superuser("bench-admin", password="bench-password-not-secret")
    owner = User.objects.create_user("bench-owner", password="bench-password-not-secret")
    tags = [
        tag_create(tenant_id=admin.tenant_id, name=f"Topic {n}", slug=f"topic-{n}", owner=owner) for n in range(TAGS)
    ]
    docs: list[list[uuid.UUID]] = []
    for tag in tags:
        batch = Document.objects.bulk_create(
            Document(
                title=f"{tag.name} document {i}",
                original_filename=f"{tag.slug}-{i}.txt",
                content_hash=uuid.uuid4().hex,
                status=Document.Status.READY,
                uploaded_by=owner,
                file=f"bench/{tag.slug}-{i}.txt",
            )
            for i in range(DOCS_PER_TAG)
        )
        for d in batch:
            d.tags.set([tag])
        docs.append([d.pk for d in batch])
    people = User.objects.bulk_create(User(username=f"person-{i}", password="!") for i in range(PEOPLE))
    sessions = ChatSession.objects.bulk_create(ChatSession(owner=p) for p in people)
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        names, template = _row_template(Message, connection, session=sessions[0], role=Message.Role.USER)
        col = {n: i for i, n in enumerate(names)}
        next_id = (Message.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
        source_rows, feedback_rows, answers = [], [], []
        rows = []
        for n in range(messages // 2):
            session = sessions[n % PEOPLE]
            at = now - timedelta(seconds=rng.uniform(60, DAYS * 86400))
            topics = rng.sample(range(TAGS), rng.choice((1, 1, 1, 2)))
            used = list(dict.fromkeys(rng.choice(docs[t]) for t in topics for _ in range(3)))[:3]
            cited = used[: rng.choice((1, 2))]
            verified = rng.random() < 0.05
            passages = [
                {"source_id": f"{d}:{k}", "document_id": str(d), "document_name": "doc", "snippet": "Passage text."}
                for k, d in enumerate(used)
            ]
            citations = [
                {**p, "metadata": {"verified": True} if verified and k == 0 else {}}
                for k, p in enumerate(passages[: len(cited)])
            ]
            question, answer = list(template), list(template)
            for row, role, pk in (
                (question, Message.Role.USER, next_id),
                (answer, Message.Role.ASSISTANT, next_id + 1),
            ):
                row[col["session_id"]] = session.pk.hex
                row[col["role"]] = role
                row[col["created_at"]] = connection.ops.adapt_datetimefield_value(at)
                row[col["updated_at"]] = connection.ops.adapt_datetimefield_value(at)
                row.insert(0, pk)
            answer[1 + col["content"]] = "An answer [1]."
            answer[1 + col["citations"]] = json.dumps(citations)
            answer[1 + col["passages"]] = json.dumps(passages)
            answer[1 + col["cites_verified"]] = verified
            answer[1 + col["reply_to_id"]] = next_id
            rows += (question, answer)
            answers.append((next_id + 1, session, at))
            source_rows += [(next_id + 1, d.hex, d in cited) for d in used]
            if rng.random() < 0.05:
                vote = AnswerFeedback.Vote.DOWN if rng.random() < 0.3 else AnswerFeedback.Vote.UP
                feedback_rows.append((next_id + 1, session.owner_id, vote, at))
            next_id += 2
            if len(rows) >= 20_000:
                _insert(cursor, Message._meta.db_table, ["id", *names], rows)
                rows = []
        _insert(cursor, Message._meta.db_table, ["id", *names], rows)
        _insert(cursor, AnswerSource._meta.db_table, ["message_id", "document_id", "cited"], source_rows)
        fb = AnswerFeedback._meta.db_table
        _insert(
            cursor,
            fb,
            ["message_id", "user_id", "vote", "reason", "comment", "created_at", "updated_at"],
            [
                (
                    m,
                    u,
                    v,
                    "",
                    "",
                    connection.ops.adapt_datetimefield_value(t),
                    connection.ops.adapt_datetimefield_value(t),
                )
                for m, u, v, t in feedback_rows
            ],
        )
    built = time.perf_counter() - started
    routed = []
    for message_id, session, at in rng.sample(answers, min(ROUTED, len(answers) // 10)):
        tag = rng.choice(tags)
        answered = rng.random() < 0.7
        routed.append(
            RoutedQuestion(
                tenant_id=admin.tenant_id,
                tag=tag,
                asker_id=session.owner_id,
                target=owner,
                session=session,
                message_id=message_id,
                question="A question nobody documented",
                status=RoutedQuestion.Status.ANSWERED if answered else RoutedQuestion.Status.OPEN,
                answered_at=at + timedelta(hours=rng.uniform(0.5, 72)) if answered else None,
            )
        )
    created = RoutedQuestion.objects.bulk_create(routed)
    RoutedQuestion.objects.filter(pk__in=[q.pk for q in created]).update(created_at=now - timedelta(days=3))
    return {
        "messages": Message.objects.count(),
        "answer_sources": AnswerSource.objects.count(),
        "build_s": round(built, 1),
        "admin": admin.pk,
        "tag": tags[0].slug,
    }


def time_report(*, admin_id: int, slug: str, repeat: int) -> dict:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from routing import figures

    admin = get_user_model().objects.get(pk=admin_id)
    until = timezone.now()
    since = until - timedelta(days=figures.FIGURES_WINDOW_DAYS)
    out = {}
    for name, tag_slug in (("tag", slug), ("no_tag", figures.NO_TAG_SLUG)):
        tag = figures.report_tag(user=admin, slug=tag_slug)
        seconds, report = [], None
        for _ in range(repeat):
            started = time.perf_counter()
            report = figures.tag_report(user=admin, tag=tag, since=since, until=until)
            seconds.append(time.perf_counter() - started)
        assert report is not None
        out[name] = {
            "asked": report.asked,
            "median_s": round(statistics.median(seconds), 3),
            "max_s": round(max(seconds), 3),
        }
    return out


def report_bench(*, messages: int) -> dict:
    """This module in a process of its own, on a scratch SQLite database (deleted after)."""
    import tempfile

    from ragchat.bench.common import run_bench_module

    with tempfile.TemporaryDirectory(prefix="ragchat-bench-report-") as scratch:
        return run_bench_module(
            "ragchat.bench.report", "--data-dir", scratch, "--messages", str(messages), timeout=3600
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ["RAGCHAT_DATA_DIR"] = str(Path(args.data_dir).resolve())
    os.environ.pop("DATABASE_URL", None)  # a scratch SQLite database, never the live one
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragchat.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    built = build(args.messages)
    timed = time_report(admin_id=built.pop("admin"), slug=built.pop("tag"), repeat=args.repeat)
    print(json.dumps({**built, "report": timed, "goal_s": 1.0}))


if __name__ == "__main__":
    main()
