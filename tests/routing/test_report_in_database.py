"""The knowledge-gap report counts the answers in the database (routing.figures.tag_report, over
chat.models.AnswerSource), never by reading the answers' passages and citations into Python: the
figures of tests/routing/test_report.py stay the same, and the bench's generated data
(ragchat.bench.report) give the same counts as the JSON the rows are derived from."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.models import AnswerSource, ChatSession, Message
from documents.models import Document
from ragchat.bench import report as bench_report
from routing import figures
from tests.routing.test_report import _cite, _doc, data  # noqa: F401

pytestmark = pytest.mark.django_db


def _reads(queries, column: str) -> list[str]:
    return [q["sql"] for q in queries if f'"chat_message"."{column}"' in q["sql"].split(" FROM ")[0]]


def test_the_report_never_loads_the_answers_json(data):  # noqa: F811
    now = data["now"]
    for tag in (data["alpha"], None):
        with CaptureQueriesContext(connection) as done:
            figures.tag_report(user=data["admin"], tag=tag, since=now - timedelta(days=30), until=now)
        assert not _reads(done.captured_queries, "passages") and not _reads(done.captured_queries, "citations")
        assert len(done.captured_queries) <= 12  # a fixed number of queries, whatever the period holds


def _plan(sql: str) -> str:
    """The database's plan for a captured query (its parameters written in)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
            return "\n".join(row[-1] for row in cursor.fetchall())
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def test_no_tag_asks_each_answer_of_the_period_for_a_tagged_source(data):  # noqa: F811
    """ "No tag" at a million messages: the count reads the period's answers once, from an index that
    holds every column it needs, and asks each answer whether a source of it is a tagged document; it
    never lists the answers of every tagged document (SQLite builds that list of all time each
    time, PostgreSQL compares each answer with it row by row once it outgrows work_mem: minutes)."""
    public = Document.objects.create(
        title="Public page", original_filename="p.txt", content_hash="p", uploaded_by=data["admin"]
    )
    session = ChatSession.objects.create(owner=data["x"], title="t")
    Message.objects.create(session=session, role="assistant", citations=[_cite(public)])
    now = timezone.now()
    with CaptureQueriesContext(connection) as done:
        report = figures.tag_report(user=data["admin"], tag=None, since=now - timedelta(days=30), until=now)
    assert report.asked == 1 and [c.document for c in report.cited] == [public]
    counting = [q["sql"] for q in done.captured_queries if "CASE WHEN" in q["sql"]]
    citing = [q["sql"] for q in done.captured_queries if 'COUNT("chat_answersource"."message_id")' in q["sql"]]
    assert len(counting) == 1 and len(citing) == 1
    plan, cited_plan = _plan(counting[0]), _plan(citing[0])
    if connection.vendor == "sqlite":
        # The period's answers are read once, in that one grouped pass (the votes on them too).
        period = "(session_id=? AND created_at>? AND created_at<?)"
        assert [q for q in done.captured_queries if period in _plan(q["sql"])] == [
            q for q in done.captured_queries if q["sql"] == counting[0]
        ]
        assert "SEARCH chat_message USING COVERING INDEX message_by_session" in plan, plan
        assert "CORRELATED SCALAR SUBQUERY" in plan and "answer_source_by_document" not in plan, plan
        assert "(message_id=? AND document_id=?)" not in plan, plan  # one search per answer, not per document
        # A listed document's citing answers are found by their id, not among every answer listed.
        assert "USING INTEGER PRIMARY KEY (rowid=?)" in cited_plan and "session_id=?" not in cited_plan, cited_plan
    else:
        assert "Anti Join" in plan, plan  # NOT IN (a subquery) never becomes one


def test_answer_sources_follow_every_save_of_an_answer(data):  # noqa: F811
    doc_a, doc_v, doc_n, doc_b = data["docs"]
    session = ChatSession.objects.create(owner=data["x"], title="t")
    answer = Message.objects.create(session=session, role="assistant", status="streaming")
    assert not AnswerSource.objects.filter(message=answer).exists()  # a draft counts nowhere
    answer.status = "complete"
    answer.citations = [_cite(doc_v, verified=True)]
    answer.passages = [_cite(doc_v), _cite(doc_n), {"snippet": "a web page"}]
    answer.save()
    rows = set(AnswerSource.objects.filter(message=answer).values_list("document_id", "cited"))
    assert rows == {(doc_v.pk, True), (doc_n.pk, False)}
    assert Message.objects.get(pk=answer.pk).cites_verified
    answer.citations = [_cite(doc_a)]
    answer.save(update_fields=["citations"])
    assert set(AnswerSource.objects.filter(message=answer).values_list("document_id", "cited")) == {
        (doc_v.pk, False),
        (doc_n.pk, False),
        (doc_a.pk, True),
    }
    assert not Message.objects.get(pk=answer.pk).cites_verified


def test_the_bench_data_count_the_same_as_their_json(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    built = bench_report.build(2_000)
    assert built["messages"] == 2_000 and built["answer_sources"] >= 1_000
    timed = bench_report.time_report(admin_id=built["admin"], slug=built["tag"], repeat=1)
    until = timezone.now()
    since = until - timedelta(days=figures.FIGURES_WINDOW_DAYS)
    by_tag = figures.questions_by_tag(tenant_id="default", since=since, until=until)  # reads the JSON
    assert timed["tag"]["asked"] == len(by_tag[built["tag"]]) > 0
    assert timed["no_tag"]["asked"] == len(by_tag.get(figures.NO_TAG_SLUG, []))


@pytest.mark.django_db(transaction=True)
def test_the_migration_derives_the_sources_of_stored_answers():
    from django.db.migrations.executor import MigrationExecutor

    def migrate(targets):
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(targets)
        return executor.loader.project_state(targets).apps

    apps = migrate([("chat", "0004_answer_feedback")])
    user = apps.get_model("ragchat", "User").objects.create(username="erin")
    session = apps.get_model("chat", "ChatSession").objects.create(owner=user)
    Old = apps.get_model("chat", "Message")
    used, cited = uuid.uuid4(), uuid.uuid4()
    passage = {"document_id": str(used), "snippet": "text"}
    citation = {"document_id": str(cited), "snippet": "text", "metadata": {"verified": True}}
    done = Old.objects.create(
        session=session, role="assistant", status="complete", citations=[citation], passages=[passage]
    )
    failed = Old.objects.create(session=session, role="assistant", status="failed", passages=[passage])
    migrate([("chat", "0005_answer_sources")])
    assert set(AnswerSource.objects.values_list("message_id", "document_id", "cited")) == {
        (done.pk, used, False),
        (done.pk, cited, True),
    }
    assert Message.objects.get(pk=done.pk).cites_verified and not Message.objects.get(pk=failed.pk).cites_verified


def test_sqlite_reads_the_database_through_a_memory_map(tmp_path):
    """Half of the report's time at a million messages was the system calls that read SQLite's pages
    one by one (ragchat.settings: PRAGMA mmap_size). The tests' database is in memory: a file
    opened with the same settings shows it."""
    if connection.vendor != "sqlite":
        pytest.skip("a SQLite setting")
    on_file = type(connections["default"])({**connection.settings_dict, "NAME": str(tmp_path / "db.sqlite3")})
    try:
        with on_file.cursor() as cursor:
            cursor.execute("PRAGMA mmap_size")
            assert cursor.fetchone()[0] >= 2**30
    finally:
        on_file.close()
