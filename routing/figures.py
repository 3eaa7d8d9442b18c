"""Figures of the knowledge loop: the inbox's figures by tag (R-ROUTE-7) and the knowledge-gap
report of one tag (issue 13). The one home for the counting rules; every figure is for the tags
`access.policy.figure_tags` gives the viewer (admins also see "no tag"), and every question or
document listed is one the viewer may open or read.

The counting rules, in one place:

- **Questions asked** on a tag in a period: the assistant's answers (complete, greetings excluded)
  given in the period that used a passage of a document carrying the tag — unless the answer was
  sent to a person — plus the questions routed to a person on the tag in the period (automatic or
  "ask the owner"; review items from down votes are not questions). An answer that was routed
  counts once, under the tag routing chose; so does a question whose answer was regenerated (its
  first version counts, and none if any version was routed). So every question has exactly one outcome:
  - **answered by the assistant**: not routed, no verified knowledge cited;
  - **answered by verified knowledge** (deflection): not routed, and it cited a passage of
    verified knowledge (citation metadata `verified`);
  - **routed** to a person.
- **Time to answer**: for the routed questions of the period that a person answered, from routing
  to the answer. Median and 90th percentile (linear interpolation between closest ranks, as
  `statistics.quantiles(method="inclusive")`; one value is its own percentile).
- **Down-vote rate**: down votes / votes, over the votes on the period's answers of the tag (every
  version of a regenerated one).
- **Unanswered questions**: the period's routed questions on the tag still open, grouped as the
  inbox groups them (similar questions share a group), ranked by how many people asked.
- **Cited documents**: the documents of the tag (readable by the viewer) cited by the period's
  answers of the tag, by how many answers cited each; **never cited**: the tag's ready documents
  no such answer cited.

"No tag" (slug ""): answers that used no passage of a tagged document (public documents only, or
none), and routed questions without a tag.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Case, Count, Exists, Func, OuterRef, Q, QuerySet, UUIDField, Value, When
from django.utils import timezone

from access import policy
from chat.models import AnswerFeedback, AnswerSource, Message
from documents.models import PUBLIC_TAG_SLUG, Document, Tag
from ragchat.services.rag_service import STRATEGY_SMALLTALK
from routing.models import RoutedQuestion
from routing.selectors import people_count

FIGURES_WINDOW_DAYS = 90
# A document (an upload, a verified answer just published) has had little time to be cited: the
# report's "never cited" leaves out the ones added in the period's last days, and says how many.
NEVER_CITED_GRACE_DAYS = 7
NO_TAG_SLUG = ""
NO_TAG_NAME = "No tag"
NO_TAG = (NO_TAG_SLUG, "No tag (admin)")

ASSISTANT, VERIFIED, ROUTED = "assistant", "verified", "routed"
OUTCOMES = (
    (ASSISTANT, "Answered by the assistant"),
    (VERIFIED, "Answered by verified knowledge"),
    (ROUTED, "Routed to a person"),
)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{round(seconds)} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def percentile(values: list[float], q: int) -> float | None:
    """The q-th percentile (1..99) by linear interpolation between closest ranks."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def share(part: int, whole: int) -> int | None:
    return None if not whole else round(100 * part / whole)


def figure_tags(*, user) -> list[tuple[str, str]]:
    """(slug, name) of the tags whose figures the user sees (`policy.figure_tags`), plus 'no tag'
    for admins."""
    pairs = [(t.slug, t.name) for t in policy.figure_tags(user=user).order_by("name")]
    if policy.may_see_untagged_figures(user=user):
        pairs.append(NO_TAG)
    return pairs


# ----------------------------------------------------------------------------------- the counting


@dataclass
class Question:
    """One question asked, with its outcome: an answer of the assistant, or a routed question."""

    at: datetime
    outcome: str
    message_id: int | None = None  # the assistant's answer
    cited: set[str] = field(default_factory=set)  # document ids its answer cited
    routed: RoutedQuestion | None = None


def counted_answers(*, tenant_id: str, since=None, until=None, message_ids=None) -> QuerySet[Message]:
    """The assistant's answers of the tenant in [since, until) (or of these ids) that count as
    questions asked (complete, greetings excluded), routed or not."""
    answers = Message.objects.filter(
        role=Message.Role.ASSISTANT, status=Message.Status.COMPLETE, session__owner__tenant_id=tenant_id
    ).exclude(query_strategy=STRATEGY_SMALLTALK)
    if message_ids is not None:
        answers = answers.filter(pk__in=message_ids)
    if since is not None:
        answers = answers.filter(created_at__gte=since, created_at__lt=until)
    return answers


def _routed_messages(*, tenant_id: str) -> QuerySet:
    """The answers that were sent to a person: each counts once, as its routed question."""
    return _routed(tenant_id).filter(message__isnull=False).values("message_id")


def _routed(tenant_id: str) -> QuerySet[RoutedQuestion]:
    return RoutedQuestion.objects.filter(tenant_id=tenant_id).exclude(origin=RoutedQuestion.Origin.FEEDBACK)


def _earlier_version() -> Exists:
    """An earlier finished answer of the assistant to the same question: the answer is a
    regenerated version, and its question was counted with the first."""
    return Exists(
        Message.objects.filter(
            reply_to=OuterRef("reply_to"),
            role=Message.Role.ASSISTANT,
            status=Message.Status.COMPLETE,
            pk__lt=OuterRef("pk"),
        ).exclude(query_strategy=STRATEGY_SMALLTALK)
    )


def _questions_not_routed(answers: QuerySet[Message], *, tenant_id: str, versions: bool = False) -> QuerySet[Message]:
    """One answer per question asked, of the questions no person was sent: regenerating is not
    asking again (the first finished version counts), and a question that was routed (with any
    version of its answer) counts once, as its routed question. `versions`: every version of those
    answers (the votes on them count)."""
    routed = _routed(tenant_id)
    answers = answers.exclude(pk__in=routed.filter(message__isnull=False).values("message_id")).exclude(
        reply_to__in=routed.filter(question_message__isnull=False).values("question_message_id")
    )
    return answers if versions else answers.exclude(_earlier_version())


def _answers(*, tenant_id: str, since, until) -> list[tuple[int, datetime, set[str], set[str], bool, int | None, bool]]:
    """(id, created_at, ids of documents used, ids of documents cited, cited verified knowledge,
    id of the question it answers, whether it is a regenerated version) of every counted assistant
    answer of the tenant in the period."""
    answers = counted_answers(tenant_id=tenant_id, since=since, until=until).annotate(regenerated=_earlier_version())
    rows = []
    values = answers.values_list("id", "created_at", "passages", "citations", "reply_to_id", "regenerated")
    for pk, created, passages, citations, question_id, regenerated in values.iterator():
        cited_items = [c for c in (citations or []) if isinstance(c, dict)]
        used = {p.get("document_id") for p in (passages or []) + cited_items if isinstance(p, dict)}
        used.discard(None)
        cited = {str(c["document_id"]) for c in cited_items if c.get("document_id")}
        verified = any((c.get("metadata") or {}).get("verified") for c in cited_items)
        rows.append((pk, created, {str(i) for i in used}, cited, verified, question_id, regenerated))
    return rows


def _tags_of(document_ids: set[str]) -> dict[str, set[str]]:
    tags_of: dict[str, set[str]] = {}
    for doc_id, slug in Document.objects.filter(id__in=list(document_ids)).values_list("id", "tags__slug"):
        if slug and slug != PUBLIC_TAG_SLUG:  # "public" is no topic: such answers count as "no tag"
            tags_of.setdefault(str(doc_id), set()).add(slug)
    return tags_of


def questions_by_tag(*, tenant_id: str, since, until) -> dict[str, list[Question]]:
    """Every question asked in the tenant in [since, until), under each tag it counts for (see the
    module's rules), each with its outcome."""
    routed = list(
        RoutedQuestion.objects.filter(tenant_id=tenant_id, created_at__gte=since, created_at__lt=until)
        .exclude(origin=RoutedQuestion.Origin.FEEDBACK)
        .select_related("tag", "asker", "group")
    )
    routed_messages = set(_routed_messages(tenant_id=tenant_id).values_list("message_id", flat=True))
    routed_questions = set(
        _routed(tenant_id).filter(question_message__isnull=False).values_list("question_message_id", flat=True)
    )
    answers = _answers(tenant_id=tenant_id, since=since, until=until)
    tags_of = _tags_of(set().union(*(a[2] for a in answers)) if answers else set())
    cited_of: dict[int, set[str]] = {}
    out: dict[str, list[Question]] = {}
    for pk, created, used, cited, verified, question_id, regenerated in answers:
        cited_of[pk] = cited
        if pk in routed_messages or question_id in routed_questions:
            continue  # counted once, as the routed question, under the tag routing chose
        if regenerated:
            continue  # the same question again: counted with its first answer
        slugs = set().union(*(tags_of.get(i, set()) for i in used)) if used else set()
        for slug in slugs or {NO_TAG_SLUG}:
            out.setdefault(slug, []).append(
                Question(at=created, outcome=VERIFIED if verified else ASSISTANT, message_id=pk, cited=cited)
            )
    for q in routed:
        slug = q.tag.slug if q.tag is not None else NO_TAG_SLUG
        out.setdefault(slug, []).append(
            Question(
                at=q.created_at,
                outcome=ROUTED,
                message_id=q.message_id,
                cited=cited_of.get(q.message_id, set()),
                routed=q,
            )
        )
    return out


def _waits(questions: list[Question]) -> list[float]:
    return sorted(
        (q.routed.answered_at - q.routed.created_at).total_seconds()
        for q in questions
        if q.routed is not None and q.routed.answered_at is not None
    )


# ----------------------------------------------------------------------------------- the inbox's table


@dataclass(frozen=True)
class TagFigures:
    """R-ROUTE-7, over the last FIGURES_WINDOW_DAYS days (the counting rules: this module's doc)."""

    slug: str
    name: str
    asked: int
    routed: int
    open: int
    median_answer_seconds: float | None

    @property
    def share_routed(self) -> int | None:
        if not self.asked:
            return None
        return min(100, round(100 * self.routed / self.asked))

    @property
    def median_display(self) -> str:
        return format_duration(self.median_answer_seconds)


def tag_figures(*, user, now=None) -> list[TagFigures]:
    if not policy.has_inbox(user=user):
        return []
    now = now or timezone.now()
    by_tag = questions_by_tag(tenant_id=user.tenant_id, since=now - timedelta(days=FIGURES_WINDOW_DAYS), until=now)
    figures = []
    for slug, name in figure_tags(user=user):
        questions = by_tag.get(slug, [])
        routed = [q for q in questions if q.outcome == ROUTED]
        waits = _waits(questions)
        figures.append(
            TagFigures(
                slug=slug,
                name=name,
                asked=len(questions),
                routed=len(routed),
                open=sum(1 for q in routed if q.routed and q.routed.status == RoutedQuestion.Status.OPEN),
                median_answer_seconds=statistics.median(waits) if waits else None,
            )
        )
    return figures


# ----------------------------------------------------------------------------------- the report


def report_tag(*, user, slug: str):
    """The tag whose report the user may see: a Tag, None for "no tag" (admins), or LookupError
    (unknown, another tenant's, or not the viewer's: all look alike)."""
    if slug == NO_TAG_SLUG:
        if policy.may_see_untagged_figures(user=user):
            return None
        raise LookupError(slug)
    tag = policy.figure_tags(user=user).filter(slug=slug).first()
    if tag is None:
        raise LookupError(slug)
    return tag


def _tag_documents(*, user, tag: Tag | None) -> QuerySet:
    """The documents a report lists for the tag, of those the viewer may read: the tag's; for "no
    tag", the ones carrying no tag but `public`."""
    documents = policy.readable_documents(user=user)
    if tag is not None:
        return documents.filter(tags=tag)
    topical = Tag.objects.filter(tenant_id=user.tenant_id).exclude(slug=PUBLIC_TAG_SLUG)
    return documents.exclude(id__in=Document.objects.filter(tags__in=topical).values("id"))


@dataclass(frozen=True)
class Bucket:
    start: datetime
    end: datetime
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def last(self) -> datetime:
        """The bucket's last moment (its end is exclusive): for "Nov 4 – Nov 10" labels."""
        return self.end - timedelta(microseconds=1)


@dataclass(frozen=True)
class UnansweredGroup:
    question: RoutedQuestion  # the newest of the group: its text and link
    people: int
    asked: int  # questions (a person may ask twice)
    first_at: datetime
    last_at: datetime


@dataclass(frozen=True)
class CitedDocument:
    document: Document
    answers: int


@dataclass(frozen=True)
class Report:
    slug: str
    name: str
    since: datetime
    until: datetime
    asked: int
    outcomes: dict[str, int]
    median_seconds: float | None
    p90_seconds: float | None
    answered_by_person: int
    open: int
    votes: int
    down_votes: int
    buckets: list[Bucket]
    bucket_days: int
    waits: list[float]
    target_hours: int | None
    unanswered: list[UnansweredGroup]
    cited: list[CitedDocument]
    never_cited: list[Document]
    recent_uncited: int = 0  # not cited, but added within NEVER_CITED_GRACE_DAYS of the period's end

    @property
    def without_person(self) -> int:
        return self.outcomes[ASSISTANT] + self.outcomes[VERIFIED]

    @property
    def share_without_person(self) -> int | None:
        return share(self.without_person, self.asked)

    @property
    def share_verified(self) -> int | None:
        return share(self.outcomes[VERIFIED], self.asked)

    @property
    def share_routed(self) -> int | None:
        return share(self.outcomes[ROUTED], self.asked)

    @property
    def down_vote_rate(self) -> int | None:
        return share(self.down_votes, self.votes)

    @property
    def median_display(self) -> str:
        return format_duration(self.median_seconds)

    @property
    def p90_display(self) -> str:
        return format_duration(self.p90_seconds)


def _bucket_edges(*, since, until) -> tuple[list[tuple[datetime, datetime]], int]:
    """Per day (periods up to two weeks) or per week; the first bucket may be shorter (buckets are
    counted back from the period's end)."""
    days = max(1, math.ceil((until - since).total_seconds() / 86400))
    width = 1 if days <= 14 else 7
    n = math.ceil(days / width)
    edges = [max(since, until - timedelta(days=width * (n - i))) for i in range(n)] + [until]
    return list(zip(edges, edges[1:], strict=False)), width


class _NoIndex(Func):
    """The column as it is, but on SQLite written `+column`: the query planner then uses no index
    for the term it stands in (sqlite.org/optoverview.html, "Disqualifying WHERE clause terms using
    unary-+"). An answer's sources are found by the answer; an IN on their document then tests each
    source against the list, instead of seeking (answer, document) once per listed document."""

    template = "%(expressions)s"

    def as_sqlite(self, compiler, connection, **extra):
        return super().as_sql(compiler, connection, template="+%(expressions)s", **extra)


def _tag_answers(*, tenant_id: str, slug: str, since, until, versions: bool = False) -> QuerySet[Message]:
    """The period's answers counted under the tag (not routed): those that used a passage of a
    document carrying it; for "no tag", those that used none of a document carrying a tag but
    `public` (the module's rules). Through AnswerSource, in the database. One per question, or
    with `versions` every regenerated version too.

    "No tag" asks, for each answer of the period, whether one of its sources is of a tagged document
    (NOT EXISTS: an anti-join on PostgreSQL, one index search per answer on SQLite), never the
    reverse: NOT IN the answers of every tagged document would build that list of all time (the
    most of the table) on SQLite, and on PostgreSQL compare each answer with it row by row once it
    outgrows work_mem (minutes at a million messages)."""
    answers = _questions_not_routed(
        counted_answers(tenant_id=tenant_id, since=since, until=until), tenant_id=tenant_id, versions=versions
    )
    if slug == NO_TAG_SLUG:
        topical = Document.objects.filter(tags__in=Tag.objects.exclude(slug=PUBLIC_TAG_SLUG)).values("id")
        tagged_sources = AnswerSource.objects.alias(document=_NoIndex("document_id", output_field=UUIDField())).filter(
            message=OuterRef("pk"), document__in=topical
        )
        return answers.exclude(Exists(tagged_sources))
    tagged = Document.objects.filter(tenant_id=tenant_id, tags__slug=slug).values("id")
    return answers.filter(pk__in=AnswerSource.objects.filter(document_id__in=tagged).values("message_id"))


def _tag_routed(*, tenant_id: str, slug: str, since, until) -> list[RoutedQuestion]:
    routed = RoutedQuestion.objects.filter(tenant_id=tenant_id, created_at__gte=since, created_at__lt=until).exclude(
        origin=RoutedQuestion.Origin.FEEDBACK
    )
    routed = routed.filter(tag__isnull=True) if slug == NO_TAG_SLUG else routed.filter(tag__slug=slug)
    return list(routed.select_related("tag", "asker", "group"))


def _unanswered(*, user, routed: list[RoutedQuestion], limit: int) -> list[UnansweredGroup]:
    visible = set(
        policy.visible_questions(user=user).filter(pk__in=[r.pk for r in routed]).values_list("pk", flat=True)
    )
    groups: dict[object, list[RoutedQuestion]] = {}
    for rq in routed:
        if rq.status != RoutedQuestion.Status.OPEN or rq.pk not in visible:
            continue
        groups.setdefault(("g", rq.group_id) if rq.group_id else ("q", rq.pk), []).append(rq)
    rows = []
    for members in groups.values():
        members.sort(key=lambda r: (r.created_at, r.pk))
        rows.append(
            UnansweredGroup(
                question=members[-1],
                people=people_count(members),
                asked=len(members),
                first_at=members[0].created_at,
                last_at=members[-1].created_at,
            )
        )
    rows.sort(key=lambda g: (-g.people, -g.asked, -g.last_at.timestamp()))
    return rows[:limit]


def tag_report(*, user, tag: Tag | None, since: datetime, until: datetime, limit: int = 10) -> Report:
    """The knowledge-gap report of one tag (None: "no tag") for a viewer `report_tag` let through.
    The answers (up to every message of the period) are counted by the database: a few aggregate
    queries whatever the period holds; the routed questions (few: people answer them) are read."""
    tenant_id = user.tenant_id
    slug = tag.slug if tag is not None else NO_TAG_SLUG
    answers = _tag_answers(tenant_id=tenant_id, slug=slug, since=since, until=until)
    routed = _tag_routed(tenant_id=tenant_id, slug=slug, since=since, until=until)
    spans, width = _bucket_edges(since=since, until=until)
    # One grouped count over the answers, every version of them (the set is read once): by bucket
    # (the first edge the answer falls before), outcome and whether it is a regenerated version
    # (which counts no question), with the votes on them. A second pass for the votes would read
    # the period's answers again, and "no tag" is most of them.
    which = Case(*(When(created_at__lt=end, then=Value(i)) for i, (_, end) in enumerate(spans)))
    grouped = (
        _tag_answers(tenant_id=tenant_id, slug=slug, since=since, until=until, versions=True)
        .annotate(bucket=which, regenerated=_earlier_version())
        .values_list("bucket", "cites_verified", "regenerated")
        .annotate(
            n=Count("pk", distinct=True),
            votes=Count("feedback"),
            down=Count("feedback", filter=Q(feedback__vote=AnswerFeedback.Vote.DOWN)),
        )
    )
    counts: Counter = Counter()
    for bucket, verified, regenerated, n, votes, down in grouped:
        if not regenerated:
            counts[(bucket, VERIFIED if verified else ASSISTANT)] += n
        counts["votes"] += votes
        counts["down"] += down
    buckets = []
    for i, (start, end) in enumerate(spans):
        in_bucket = {
            ASSISTANT: counts[(i, ASSISTANT)],
            VERIFIED: counts[(i, VERIFIED)],
            ROUTED: sum(1 for r in routed if start <= r.created_at < end),
        }
        buckets.append(Bucket(start=start, end=end, counts={key: in_bucket[key] for key, _ in OUTCOMES}))
    outcomes = {key: sum(b.counts[key] for b in buckets) for key, _ in OUTCOMES}
    waits = sorted((r.answered_at - r.created_at).total_seconds() for r in routed if r.answered_at is not None)
    routed_messages = [r.message_id for r in routed if r.message_id is not None]
    # The votes on the routed questions' answers, every version of them (none is among the above).
    voted = Q(message_id__in=routed_messages) | Q(
        message__reply_to_id__in=[r.question_message_id for r in routed if r.question_message_id is not None],
        message__role=Message.Role.ASSISTANT,
    )
    votes = AnswerFeedback.objects.filter(voted).aggregate(
        votes=Count("pk"), down=Count("pk", filter=Q(vote=AnswerFeedback.Vote.DOWN))
    )
    # Only the tag's documents are listed: the answers' citations of those are counted, each citing
    # answer looked up by its id (a list of the period's answers would be all of them for "no tag").
    # A routed question's answer counts what it cited if it is one of the period's counted answers.
    documents = _tag_documents(user=user, tag=tag)
    cited_by = AnswerSource.objects.filter(cited=True, document_id__in=documents.values("id"))
    citing = Counter(
        {
            str(row["document_id"]): row["answers"]
            for row in cited_by.filter(Exists(answers.filter(pk=OuterRef("message_id"))))
            .values("document_id")
            .annotate(answers=Count("message_id"))
        }
    )
    # The period is checked here, not in SQL: with it, SQLite walks the period instead of these ids.
    counted_routed = [
        pk
        for pk, at in counted_answers(tenant_id=tenant_id, message_ids=routed_messages).values_list("pk", "created_at")
        if since <= at < until
    ]
    citing.update(
        str(doc_id) for doc_id in cited_by.filter(message_id__in=counted_routed).values_list("document_id", flat=True)
    )
    cited_docs = {str(d.pk): d for d in documents.filter(id__in=list(citing))}
    cited = sorted(
        (CitedDocument(document=d, answers=citing[pk]) for pk, d in cited_docs.items()),
        key=lambda c: (-c.answers, c.document.title.lower()),
    )
    uncited = documents.filter(status=Document.Status.READY, created_at__lt=until).exclude(id__in=list(citing))
    settled = until - timedelta(days=NEVER_CITED_GRACE_DAYS)
    never = list(uncited.filter(created_at__lt=settled).order_by("title"))
    recent_uncited = uncited.filter(created_at__gte=settled).count()
    return Report(
        slug=slug,
        name=tag.name if tag is not None else NO_TAG_NAME,
        since=since,
        until=until,
        asked=sum(outcomes.values()),
        outcomes=outcomes,
        median_seconds=statistics.median(waits) if waits else None,
        p90_seconds=percentile(waits, 90),
        answered_by_person=len(waits),
        open=sum(1 for r in routed if r.status == RoutedQuestion.Status.OPEN),
        votes=counts["votes"] + votes["votes"],
        down_votes=counts["down"] + votes["down"],
        buckets=buckets,
        bucket_days=width,
        waits=waits,
        target_hours=tag.target_hours if tag is not None else None,
        unanswered=_unanswered(user=user, routed=routed, limit=limit),
        cited=cited[:limit],
        never_cited=never,
        recent_uncited=recent_uncited,
    )
