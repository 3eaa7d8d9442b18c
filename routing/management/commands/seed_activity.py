"""A month of seeded demo activity on top of `demo_data`: people asking questions, the assistant's
answers (citing the demo documents), questions routed to the tag owners (grouped when similar,
answered after a realistic wait, some still open), answers published as verified knowledge (which
later questions are then answered from), and votes on answers. It is what the knowledge-gap report
(`/routing/report/<tag>/`) needs to show something.

Everything is clearly labelled: seeded chats are titled "Seeded demo · …", their messages carry
model "seeded-demo-activity", routed questions say "Seeded demo activity" in their reason, and the
extra people are "(seeded)". The answers are canned texts written here, not the output of the RAG
pipeline (that would take hours on a laptop); the verified knowledge is published through
`routing.services.question_publish` and indexed, so the assistant really can cite it afterwards.

Deterministic: the same `--seed` and `--days` give the same activity (relative to the day it runs).
`--reset` removes earlier seeded activity first; without it a second run refuses.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from chat.models import AnswerFeedback, ChatSession, Message
from documents.models import Document, Tag
from routing.models import QuestionGroup, RoutedQuestion, VerifiedAnswer

TENANT = "default"
TITLE_PREFIX = "Seeded demo · "
MODEL = "seeded-demo-activity"

# Extra employees (no password: they cannot sign in), and the tags they read.
PEOPLE = [
    ("liam", "Liam", "Lund", ["handbook", "it"]),
    ("olivia", "Olivia", "Ortiz", ["handbook", "finance"]),
    ("mason", "Mason", "Meyer", ["handbook", "it", "finance"]),
    ("sofia", "Sofia", "Silva", ["handbook", "it"]),
    ("lucas", "Lucas", "Lee", ["handbook", "finance"]),
    ("mia", "Mia", "Moreau", ["handbook", "it"]),
    ("omar", "Omar", "Okafor", ["handbook", "it", "finance"]),
    ("zoe", "Zoe", "Zhang", ["handbook"]),
]

# Per tag: questions per weekday, questions the documents answer (question, answer, document
# filename), and the gaps (question paraphrases, the owner's answer, weight, publish as verified).
ACTIVITY = {
    "handbook": {
        "rate": 4.5,
        "answered": [
            ("How many vacation days do I get per year?", "Full-time employees get 25 vacation days a year."),
            ("What are the core working hours?", "Core hours are 10:00 to 15:00; the rest is flexible."),
            ("How do I report sick leave?", "Tell your manager before 9:00 and log it in the HR portal."),
            ("Can I carry over unused vacation days?", "Up to 5 days carry over to the end of March."),
            ("What is the dress code at the office?", "Business casual; safety shoes in the workshop."),
            ("How much notice do I need to give for parental leave?", "At least eight weeks before it starts."),
            ("Is there a policy on working from home?", "Up to two days a week, agreed with your manager."),
            ("Who do I talk to about a conflict with a colleague?", "Your manager first, then HR."),
        ],
        "docs": {"employee-handbook.docx": 1.0},
        "gaps": [
            (
                [
                    "Can I bring my dog to the office?",
                    "Are dogs allowed at the office?",
                    "Is the office pet-friendly?",
                    "Can my dog come to work with me on Fridays?",
                ],
                "Dogs are welcome on Fridays in the open office area, not in the workshop or kitchen.",
                5,
                True,
            ),
            (
                [
                    "How do I book a desk in the new office?",
                    "Where can I reserve a desk?",
                    "Is there a desk booking system?",
                ],
                "Desks are booked in the Workplace app, up to two weeks ahead.",
                4,
                True,
            ),
            (
                ["Does the company pay for a gym membership?", "Is there a fitness allowance?"],
                "Yes: up to 30 EUR a month, claimed through expenses.",
                3,
                False,
            ),
            (
                ["What happens to my vacation days if I change to part-time?", "Part-time vacation calculation?"],
                "They are recalculated pro rata from the month you change.",
                2,
                False,
            ),
            (
                ["Can I volunteer during working hours?", "Do we get volunteering days?"],
                "Two paid volunteering days a year, agreed with your manager.",
                2,
                False,
            ),
            (
                ["Is there a sabbatical policy?", "Can I take unpaid leave for three months?"],
                "",
                1,
                False,
            ),
            (
                [
                    "Will there be a Christmas party this year?",
                    "When is the year-end party?",
                    "Is the team event in December?",
                ],
                "",
                2,
                False,
            ),
        ],
    },
    "it": {
        "rate": 3.5,
        "answered": [
            ("How do I reset my password?", "Use the self-service portal; passwords need 14 characters."),
            ("How do I set up two-factor authentication?", "Install the authenticator app and scan the code."),
            ("How do I connect to the VPN?", "Open the VPN client and sign in with your company account."),
            ("What should I do if I get a phishing email?", "Use the Report phishing button; do not click links."),
            ("How do I request new software?", "Open a helpdesk ticket with the name and the business need."),
            ("Can I use a USB stick?", "Only encrypted company USB sticks are allowed."),
            ("How do I contact the helpdesk?", "Helpdesk: extension 4357 or the helpdesk portal."),
        ],
        "docs": {"it-security-policy.pdf": 0.6, "it-helpdesk-faq.md": 0.4},
        "gaps": [
            (
                [
                    "How do I set up the new printer on the second floor?",
                    "Printer on floor 2 does not show up, how do I add it?",
                    "How do I install the office printer on a Mac?",
                ],
                "Add it from Settings > Printers: it is listed as BW-PRINT-2F; Macs need the driver from the portal.",
                5,
                True,
            ),
            (
                ["Can I use my personal phone for work email?", "Is BYOD allowed for email?"],
                "Yes, with the Outlook app and a device PIN; the company can wipe only the work profile.",
                4,
                True,
            ),
            (
                ["How do I get access to the design drive?", "Who approves access to shared drives?"],
                "The drive's owner approves it in the access portal; IT grants it within a day.",
                3,
                False,
            ),
            (
                ["When is my laptop due for replacement?", "How often do laptops get replaced?"],
                "Every four years, or earlier when broken; IT contacts you.",
                2,
                False,
            ),
            (["Can I install Docker on my work laptop?"], "", 1, False),
            (
                ["When does the new ERP system go live?", "Will we get training for the new ERP?", "ERP go-live date?"],
                "",
                2,
                False,
            ),
        ],
    },
    "finance": {
        "rate": 2.5,
        "answered": [
            ("What is the daily meal allowance on business trips?", "45 EUR a day in Germany, more abroad."),
            ("How do I submit an expense report?", "Upload receipts in the expense tool within 30 days."),
            ("Which hotel class can I book for business travel?", "Up to four stars, within the city rate."),
            ("Do I need approval before booking a flight?", "Yes, your manager approves trips over 500 EUR."),
            ("Can I expense a taxi to the airport?", "Yes, when public transport is not reasonable."),
        ],
        "docs": {"expense-and-travel-policy.pdf": 1.0},
        "gaps": [
            (
                [
                    "What is the mileage rate for using my own car?",
                    "How much do I get per km with my private car?",
                    "Mileage allowance for private car trips?",
                ],
                "0.30 EUR per kilometre, claimed in the expense tool with the route.",
                5,
                True,
            ),
            (
                ["Can I expense a home office chair?", "Does the company pay for home office furniture?"],
                "Up to 250 EUR once, with your manager's approval.",
                3,
                False,
            ),
            (
                ["How do I pay a foreign supplier in USD?", "Can finance pay an invoice in dollars?"],
                "",
                2,
                False,
            ),
            (["Are the 2027 per diem rates published yet?", "What are next year's travel allowances?"], "", 1, False),
        ],
    },
    "": {  # questions on no topic (public documents only): the admins' "no tag"
        "rate": 0.6,
        "answered": [
            ("When is the office closed over the holidays?", "From 24 December to 1 January."),
            ("Is the office open between Christmas and New Year?", "No, it is closed from 24 December."),
        ],
        "docs": {"holiday-closure.txt": 1.0},
        "gaps": [(["Where can I park my bike?", "Is there bike parking?"], "", 1, False)],
    },
}
REASONS = ["wrong", "outdated", "incomplete", "off_topic"]
COMMENTS = {
    "wrong": "That is not what my manager told me.",
    "outdated": "I think this changed last year.",
    "incomplete": "It does not say how to apply.",
    "off_topic": "I asked about something else.",
}


@dataclass
class Gap:
    tag: str
    index: int
    variants: list[str]
    answer: str
    publish: bool
    group: QuestionGroup | None = None
    group_due: datetime | None = None  # when the owner answers the current group
    open_questions: list[RoutedQuestion] = field(default_factory=list)
    published_at: datetime | None = None
    document: Document | None = None


def _at(rows, when):
    """Set auto_now_add timestamps (created_at) after the fact."""
    model = type(rows[0])
    model.objects.filter(pk__in=[r.pk for r in rows]).update(created_at=when)


class Command(BaseCommand):
    help = "Seed a month of demo activity (questions, routed questions, verified knowledge, votes) on the demo data."

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=30)
        parser.add_argument("--seed", type=int, default=13)
        parser.add_argument("--reset", action="store_true", help="remove earlier seeded activity first")

    def handle(self, *args, days=30, seed=13, reset=False, **options):
        if not 1 <= days <= 365:
            raise CommandError("--days must be between 1 and 365.")
        if ChatSession.objects.filter(title__startswith=TITLE_PREFIX).exists():
            if not reset:
                raise CommandError("Seeded activity exists already: run with --reset to replace it.")
            self._reset()
        if not Tag.objects.filter(tenant_id=TENANT, slug__in=["handbook", "it", "finance"]).count() == 3:
            call_command("demo_data", stdout=self.stdout)
        self.rng = random.Random(seed)
        self.now = timezone.now().replace(minute=0, second=0, microsecond=0)
        self.published: list[Document] = []
        from documents.management.commands._indexing import close_vector_store, open_vector_store

        open_vector_store()  # published verified knowledge is indexed inline when the month commits
        try:
            with transaction.atomic():
                self._setup()
                # The documents were there for the whole month asked about (the report's "never
                # cited" does not judge documents added in its last days).
                start = self.now - timedelta(days=days + 1)
                Document.objects.filter(tenant_id=TENANT, created_at__gt=start).update(created_at=start)
                counts = self._simulate(days)
        finally:
            close_vector_store()
        for document in Document.objects.filter(pk__in=[d.pk for d in self.published]).order_by("created_at"):
            self.stdout.write(f"  verified knowledge “{document.title}”: {document.status}")
        self.stdout.write(
            "Seeded demo activity over {days} days: {questions} questions, {routed} routed, "
            "{published} answers published as verified knowledge, {votes} votes ({reviews} down votes became review items).".format(
                days=days, **counts
            )
        )

    # ------------------------------------------------------------------ setup

    def _reset(self):
        seeded = RoutedQuestion.objects.filter(session__title__startswith=TITLE_PREFIX)
        documents = Document.objects.filter(pk__in=seeded.exclude(published_document=None).values("published_document"))
        from documents.services import document_delete

        for document in list(documents):
            document_delete(document=document)
        VerifiedAnswer.objects.filter(source_question__in=seeded).delete()
        QuestionGroup.objects.filter(questions__in=seeded).delete()
        ChatSession.objects.filter(title__startswith=TITLE_PREFIX).delete()
        self.stdout.write("Removed the earlier seeded activity.")

    def _setup(self):
        User = get_user_model()
        self.tags = {t.slug: t for t in Tag.objects.filter(tenant_id=TENANT)}
        for username, first, last, slugs in PEOPLE:
            user, created = User.objects.get_or_create(
                username=f"{username}.seeded",
                defaults={"first_name": first, "last_name": f"{last} (seeded)", "tenant_id": TENANT},
            )
            if created:
                user.set_unusable_password()
                user.save()
            for slug in slugs:
                self.tags[slug].members.add(user)
        self.askers = {
            slug: sorted(set(tag.members.all()) | ({tag.owner} if tag.owner else set()), key=lambda u: u.username)
            for slug, tag in self.tags.items()
            if slug in ACTIVITY
        }
        self.askers[""] = sorted(User.objects.filter(tenant_id=TENANT, is_active=True), key=lambda u: u.username)
        self.admin = User.objects.filter(tenant_id=TENANT, is_superuser=True).order_by("pk").first()
        by_name = {d.original_filename: d for d in Document.objects.filter(tenant_id=TENANT)}
        self.docs = {
            slug: [(by_name[f], w) for f, w in spec["docs"].items() if f in by_name] for slug, spec in ACTIVITY.items()
        }
        if not all(self.docs.values()):
            raise CommandError("The demo documents are missing: run `manage.py demo_data` first.")
        self.gaps = {
            slug: [Gap(slug, i, *g[:2], publish=g[3]) for i, g in enumerate(spec["gaps"])]
            for slug, spec in ACTIVITY.items()
        }

    # ------------------------------------------------------------------ the month

    def _events(self, days: int):
        events = []
        start = (self.now - timedelta(days=days)).replace(hour=0)
        for d in range(days + 1):
            day = start + timedelta(days=d)
            weekday = day.weekday() < 5
            for slug, spec in ACTIVITY.items():
                rate = spec["rate"] * (1.0 if weekday else 0.15) * (1 + 0.02 * d)  # slowly growing use
                for _ in range(self._poisson(rate)):
                    when = day + timedelta(hours=8 + self.rng.betavariate(2, 2) * 10, minutes=self.rng.randrange(60))
                    if when < self.now:
                        events.append((when, slug))
        events.sort(key=lambda e: e[0])
        return events

    def _poisson(self, lam: float) -> int:
        n, p, limit = 0, 1.0, math.exp(-lam)
        while True:
            p *= self.rng.random()
            if p <= limit:
                return n
            n += 1

    def _simulate(self, days: int) -> dict:
        counts = {"questions": 0, "routed": 0, "published": 0, "votes": 0, "reviews": 0}
        for when, slug in self._events(days):
            self._answer_due_groups(until=when)
            spec = ACTIVITY[slug]
            asker = self.rng.choice(self.askers[slug])
            gaps = self.gaps[slug]
            if self.rng.random() < 0.30:  # a question the documents do not answer
                gap = self.rng.choices(gaps, weights=[g[2] for g in spec["gaps"]])[0]
                if gap.published_at is not None and gap.published_at < when:
                    self._verified_answer(when, slug, asker, gap)
                else:
                    self._routed(when, slug, asker, gap)
                    counts["routed"] += 1
            else:
                question, answer = self.rng.choice(spec["answered"])
                self._assistant(when, slug, asker, question, answer)
            counts["questions"] += 1
        self._answer_due_groups(until=self.now)
        counts["published"] = len(self.published)
        counts["votes"] = AnswerFeedback.objects.filter(message__model=MODEL).count()
        counts["reviews"] = RoutedQuestion.objects.filter(
            origin=RoutedQuestion.Origin.FEEDBACK, session__title__startswith=TITLE_PREFIX
        ).count()
        return counts

    # ------------------------------------------------------------------ pieces

    def _citation(self, doc: Document, i: int, verified_by: str = "", verified_at: str = "") -> dict:
        meta = {"verified": True, "verified_by": verified_by, "verified_at": verified_at} if verified_by else {}
        snippet = f"Seeded demo activity: a passage of {doc.title}."
        return {
            "source_id": f"{doc.pk}:{i}",
            "document_id": str(doc.pk),
            "document_name": doc.title,
            "chunk_index": i,
            "page_number": None,
            "section": "",
            "relevance_score": round(self.rng.uniform(0.55, 0.9), 2),
            "snippet": snippet,
            "snippet_full": snippet,
            "metadata": meta,
        }

    def _turn(self, when, slug, asker, question, answer, citations, *, confidence, action):
        session = ChatSession.objects.create(owner=asker, title=(TITLE_PREFIX + question)[:120])
        user_msg = Message.objects.create(session=session, role=Message.Role.USER, content=question)
        markers = " ".join(f"[SourceId: {c['source_id']}]" for c in citations)
        reply = Message.objects.create(
            session=session,
            role=Message.Role.ASSISTANT,
            content=f"{answer} {markers}".strip(),
            citations=citations,
            passages=citations,
            confidence={
                "overall": confidence,
                "retrieval": confidence / 100,
                "coverage": confidence / 100,
                "llm": confidence,
            },
            action=action,
            model=MODEL,
            query_strategy="seeded",
            reply_to=user_msg,
        )
        _at([user_msg], when)
        _at([reply], when + timedelta(seconds=self.rng.randint(4, 12)))
        ChatSession.objects.filter(pk=session.pk).update(created_at=when, updated_at=when)
        return session, user_msg, reply

    def _vote(self, reply, asker, when, down_share: float, slug: str, routed: RoutedQuestion | None = None):
        """Maybe a vote on the reply. A down vote is a review item; on a routed draft it goes with
        the routed question instead (one question, one item: routing.services.feedback_vote)."""
        if self.rng.random() > 0.35:
            return
        down = self.rng.random() < down_share
        reason = self.rng.choice(REASONS) if down else ""
        feedback = AnswerFeedback.objects.create(
            message=reply,
            user=asker,
            vote=-1 if down else 1,
            reason=reason,
            comment=COMMENTS[reason] if down and self.rng.random() < 0.6 else "",
        )
        voted = when + timedelta(minutes=self.rng.randint(1, 30))
        _at([feedback], voted)
        if down and routed is not None:
            RoutedQuestion.objects.filter(pk=routed.pk).update(feedback=feedback)
        elif down:
            self._review_item(feedback, reply, asker, voted, slug)

    def _review_item(self, feedback, reply, asker, at, slug):
        """A down vote with a reason is a review item in the owner's inbox; older ones are resolved
        (dismissed with a note, or corrected: the correction reaches the asker like an answer)."""
        tag = self.tags.get(slug) if slug else None
        owner = (tag.owner if tag else None) or self.admin
        item = RoutedQuestion.objects.create(
            tenant_id=TENANT,
            asker=asker,
            session=reply.session,
            message=reply,
            question_message=reply.reply_to,
            tag=tag,
            target=tag.owner if tag else None,
            fallback=tag is None or tag.owner is None,
            reason=f"Seeded demo activity: down vote ({feedback.get_reason_display()})",
            origin=RoutedQuestion.Origin.FEEDBACK,
            feedback=feedback,
            question=reply.reply_to.content,
            citations=reply.citations,
            draft=reply.content,
            confidence=reply.confidence,
        )
        _at([item], at)
        resolved = at + timedelta(hours=self.rng.lognormvariate(math.log(20), 0.8))
        if resolved > self.now:
            return
        if self.rng.random() < 0.5:
            note = "Seeded demo activity: checked with the documents, the answer is right."
            RoutedQuestion.objects.filter(pk=item.pk).update(
                status=RoutedQuestion.Status.CLOSED,
                resolution=RoutedQuestion.Resolution.DISMISSED,
                resolution_note=note,
                answered_by=owner,
                answered_at=resolved,
            )
            return
        text = "Seeded demo activity: a correction from the owner; the document will be updated."
        message = Message.objects.create(
            session=reply.session, role=Message.Role.OWNER, author=owner, content=text, reply_to=reply.reply_to
        )
        _at([message], resolved)
        RoutedQuestion.objects.filter(pk=item.pk).update(
            status=RoutedQuestion.Status.ANSWERED,
            resolution=RoutedQuestion.Resolution.CORRECTED,
            answer=text,
            answered_by=owner,
            answered_at=resolved,
            answer_message=message,
        )

    def _pick_docs(self, slug):
        docs, weights = zip(*self.docs[slug], strict=True)
        first = self.rng.choices(docs, weights=weights)[0]
        chosen = [first]
        others = [d for d in docs if d != first]
        if others and self.rng.random() < 0.3:
            chosen.append(self.rng.choice(others))
        return chosen

    def _assistant(self, when, slug, asker, question, answer):
        citations = [self._citation(d, self.rng.randrange(3)) for d in self._pick_docs(slug)]
        _, _, reply = self._turn(
            when, slug, asker, question, answer, citations, confidence=self.rng.randint(72, 95), action="CITE"
        )
        self._vote(reply, asker, when, down_share=0.12, slug=slug)

    def _verified_answer(self, when, slug, asker, gap: Gap):
        va = gap.document.verified_answer if gap.document else None
        by = va.verified_by.get_full_name() if va and va.verified_by else "the owner"
        citations = [self._citation(gap.document, 0, verified_by=by, verified_at=gap.published_at.date().isoformat())]
        _, _, reply = self._turn(
            when,
            slug,
            asker,
            self.rng.choice(gap.variants),
            gap.answer,
            citations,
            confidence=self.rng.randint(85, 97),
            action="CITE",
        )
        self._vote(reply, asker, when, down_share=0.04, slug=slug)

    def _routed(self, when, slug, asker, gap: Gap):
        tag = self.tags.get(slug) if slug else None
        question = self.rng.choice(gap.variants)
        citations = [self._citation(d, self.rng.randrange(3)) for d in self._pick_docs(slug)][:1]
        session, user_msg, reply = self._turn(
            when,
            slug,
            asker,
            question,
            "I could not find a clear answer in the documents.",
            citations,
            confidence=self.rng.randint(18, 45),
            action="ROUTE",
        )
        if gap.group is None:
            gap.group = QuestionGroup.objects.create(tenant_id=TENANT, tag=tag, representative_query=question)
            QuestionGroup.objects.filter(pk=gap.group.pk).update(created_at=when)
            # How long until the owner answers this group: median about 6 hours, a long tail;
            # some gaps nobody answers (no answer written).
            hours = self.rng.lognormvariate(math.log(6), 1.1)
            gap.group_due = when + timedelta(hours=hours) if gap.answer else None
        manual = self.rng.random() < 0.2
        owner = tag.owner if tag else None
        rq = RoutedQuestion.objects.create(
            tenant_id=TENANT,
            asker=asker,
            session=session,
            message=reply,
            question_message=user_msg,
            tag=tag,
            target=owner,
            fallback=owner is None,
            reason="Seeded demo activity: " + ("asked the owner" if manual else "low confidence"),
            origin=RoutedQuestion.Origin.MANUAL if manual else RoutedQuestion.Origin.ROUTE,
            question=question,
            contextual_query=question,
            citations=citations,
            draft=reply.content,
            confidence=reply.confidence,
            group=gap.group,
        )
        _at([rq], when)
        gap.open_questions.append(rq)
        self._vote(reply, asker, when, down_share=0.45, slug=slug, routed=rq)

    def _answer_due_groups(self, *, until):
        for gaps in self.gaps.values():
            for gap in gaps:
                if gap.group_due is None or gap.group_due > until or gap.group_due > self.now:
                    continue
                self._answer_group(gap, at=gap.group_due)

    def _answer_group(self, gap: Gap, *, at):
        tag = self.tags.get(gap.tag) if gap.tag else None
        person = (tag.owner if tag else None) or self.admin
        for rq in gap.open_questions:
            message = Message.objects.create(
                session=rq.session,
                role=Message.Role.OWNER,
                author=person,
                content=gap.answer,
                reply_to=rq.question_message,
            )
            _at([message], at)
            RoutedQuestion.objects.filter(pk=rq.pk).update(
                status=RoutedQuestion.Status.ANSWERED,
                answer=gap.answer,
                answered_by=person,
                answered_at=at,
                answer_message=message,
                seen_at=at + timedelta(hours=2) if at + timedelta(hours=2) < self.now else None,
            )
        QuestionGroup.objects.filter(pk=gap.group.pk).update(status=QuestionGroup.Status.ANSWERED, answered_at=at)
        if gap.publish and gap.published_at is None and tag is not None and gap.open_questions:
            self._publish(gap, gap.open_questions[0], person, at)
        gap.group, gap.group_due, gap.open_questions = None, None, []

    def _publish(self, gap: Gap, rq: RoutedQuestion, person, at):
        from routing.services import question_publish

        rq.refresh_from_db()
        document = question_publish(question=rq, user=person)
        Document.objects.filter(pk=document.pk).update(created_at=at)
        tag = self.tags[gap.tag]
        VerifiedAnswer.objects.get_or_create(
            document=document,
            defaults={
                "tenant_id": TENANT,
                "tag": tag,
                "question": rq.question,
                "answer": gap.answer,
                "source_question": rq,
                "verified_by": person,
                "verified_at": at,
                "review_by": (at + timedelta(days=tag.review_days)).date(),
            },
        )
        gap.published_at, gap.document = at, document
        self.published.append(document)
