"""Routing pages: the owner's inbox (with the R-ROUTE-7 figures), one question with its answer form,
the asker's "ask the owner" button, and the asker's list of their routed questions.

Every question is looked up through `question_for_user`: anyone but its owner and the admins gets a
404, on the page and on POST alike.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from access import policy
from chat import presenters
from chat.rendering import render_answer
from documents.models import PUBLIC_TAG_SLUG
from documents.selectors import with_outdated
from ragchat.bounds import request_int
from ragchat.dates import shown_date
from ragchat.htmx import redirect_after_post
from ragchat.partials import render_partial
from routing import charts, exports, figures, knowledge, selectors, services
from routing.context_processors import nav_figures
from routing.forms import AnswerForm, KnowledgeEditForm, NotificationPreferenceForm, ReportPeriodForm
from routing.models import NotificationPreference, RoutedQuestion, VerifiedAnswer


@login_required
@require_GET
def inbox(request):
    user = request.user
    if not policy.has_inbox(user=user):
        raise Http404("No inbox.")
    rows = selectors.inbox_rows(user=user)
    answered = selectors.inbox_questions(user=user, status=RoutedQuestion.Status.ANSWERED)[:10]
    return render(
        request,
        "routing/inbox.html",
        {
            "rows": rows,
            "open_count": selectors.inbox_open_count(user=user),  # questions, as the live update counts
            "answered": answered,
            "figures": figures.tag_figures(user=user),
            "is_admin": policy.is_admin(user),
            "window_days": figures.FIGURES_WINDOW_DAYS,
            "untagged_slug": UNTAGGED,
            "review_items": knowledge.needs_review_items(user)[:50],
        },
    )


def _publish_tags(*, user, question: RoutedQuestion):
    if question.tag is not None:
        return None
    return policy.uploadable_tags(user=user).exclude(slug=PUBLIC_TAG_SLUG).order_by("name")


@login_required
def question_detail(request, question_id):
    question = selectors.question_for_user(user=request.user, question_id=question_id)
    publish_tags = _publish_tags(user=request.user, question=question)
    form = AnswerForm(publish_tags=publish_tags)
    if request.method == "POST":
        form = AnswerForm(request.POST, publish_tags=publish_tags)
        if form.is_valid():
            try:
                answered = services.question_answer(
                    question=question,
                    user=request.user,
                    text=form.cleaned_data["answer"],
                    publish=form.cleaned_data["publish"],
                    publish_tag=form.cleaned_data.get("publish_tag"),
                )
            except services.QuestionNotFound as e:
                raise Http404("No such question.") from e
            except services.RoutingError as e:
                form.add_error(None, str(e))
            else:
                people = selectors.people_count(answered)
                messages.success(
                    request,
                    f"Answer sent to {people} {'person' if people == 1 else 'people'}."
                    + (
                        " Published as verified knowledge: it is being indexed." if form.cleaned_data["publish"] else ""
                    ),
                )
                return redirect("routing:question", question_id=question.pk)
    elif request.method != "GET":
        return HttpResponse(status=405)
    context = policy.question_context(
        user=request.user, question=question, conversation=selectors.conversation_before(question=question)
    )
    # Sources whose document was marked outdated since carry the warning (looked up now).
    sources = with_outdated(context.sources.visible)
    group = selectors.group_questions(question=question)
    # The conversation reads as the chat showed it: Markdown rendered, citations as numbered cards
    # (only entries whose every document the viewer may read are shown at all).
    conversation = [
        {
            "entry": entry,
            "html": render_answer(
                entry.message.content,
                known=knowledge.badge_states(list(entry.message.citations or [])),
                prefix=f"rq{question.pk}c{entry.message.pk}",
            ).html
            if entry.visible and entry.message.role != "user"
            else "",
        }
        for entry in context.conversation
    ]
    return render(
        request,
        "routing/question.html",
        {
            "q": question,
            "form": form,
            "group": group,
            "group_people": selectors.people_count(group),
            "context": context,
            "conversation": conversation,
            "sources": sources,
            "confidence": _confidence(question),
            "draft_html": render_answer(question.draft, known=sources, prefix=f"rq{question.pk}").html
            if question.draft and context.draft_visible
            else "",
            "can_publish": question.status == RoutedQuestion.Status.ANSWERED and not question.published_document_id,
            "publish_tags": publish_tags,
            "review": _review_context(user=request.user, question=question),
            "downvote": _downvote(question),
        },
    )


def _downvote(question: RoutedQuestion):
    """The asker's down vote a routed question carries (they down-voted its draft, or another
    version of the answer): one question, one item, with the vote on its page."""
    feedback = question.feedback
    if question.origin == RoutedQuestion.Origin.FEEDBACK or feedback is None:
        return None
    return feedback if feedback.vote == -1 and feedback.reason else None


def _review_context(*, user, question: RoutedQuestion) -> dict | None:
    """A review item (a down-voted answer): the asker's reason and comment, and the cited documents
    the viewer may read (the ones they may mark outdated)."""
    if question.origin != RoutedQuestion.Origin.FEEDBACK:
        return None
    return {
        "feedback": question.feedback,
        "documents": services.cited_documents_for(question=question, user=user)
        if question.status == RoutedQuestion.Status.OPEN
        else [],
        "answer_was_owner": question.message is not None and question.message.role == "owner",
    }


def _confidence(question: RoutedQuestion) -> dict | None:
    c = question.confidence or {}
    if "overall" not in c:
        return None

    def pct(v) -> int:
        try:
            return round(float(v) * 100)
        except (TypeError, ValueError):
            return 0

    return {
        "overall": int(c["overall"]),
        "retrieval": pct(c.get("retrieval")),
        "coverage": pct(c.get("coverage")),
        "llm": int(c.get("llm") or 0),
    }


@login_required
@require_POST
def question_publish(request, question_id):
    question = selectors.question_for_user(user=request.user, question_id=question_id)
    tag = None
    raw = request.POST.get("publish_tag")
    if raw:
        tag_id = request_int(raw)
        tag = policy.uploadable_tags(user=request.user).filter(pk=tag_id).first() if tag_id else None
        if tag is None:
            raise Http404("No such tag.")
    try:
        services.question_publish(question=question, user=request.user, tag=tag)
    except services.QuestionNotFound as e:
        raise Http404("No such question.") from e
    except services.RoutingError as e:
        messages.error(request, str(e))
    else:
        messages.success(request, "Published as verified knowledge: it is being indexed.")
    return redirect("routing:question", question_id=question.pk)


@login_required
@require_POST
def question_close(request, question_id):
    question = selectors.question_for_user(user=request.user, question_id=question_id)
    services.question_close(question=question, user=request.user)
    messages.success(request, "Question closed without an answer.")
    return redirect("routing:inbox")


@login_required
@require_POST
def escalate(request, message_id):
    """The asker's "Ask the owner" on an answer (htmx: returns the button's replacement)."""
    message = policy.message_in_own_session(user=request.user, message_id=message_id)
    if message is None:  # not the asker's own answer; question_escalate checks the same again
        raise Http404("No such answer.")
    try:
        question = services.question_escalate(user=request.user, message=message)
    except services.QuestionNotFound as e:
        raise Http404("No such answer.") from e
    except services.RoutingError as e:
        if not request.htmx:
            return _back_to_answer(request, message, messages.ERROR, str(e))
        # htmx swaps only successful responses: with a 400 the refusal would never show.
        return HttpResponse(render_partial("routing/_escalated.html", {"error": str(e)}))
    if not request.htmx:
        return _back_to_answer(request, message, messages.SUCCESS, "Your question was sent.")
    return HttpResponse(render_partial("routing/_escalated.html", {"q": question}))


def _back_to_answer(request, message, level: int, text: str) -> HttpResponse:
    """Where an answer's form (the vote, "Ask the owner") posted without script ends, sent or refused:
    back on the chat page at that answer, `text` said as a message of `level`. (With htmx the form's
    own fragment comes back in its place instead.)"""
    messages.add_message(request, level, text)
    return redirect(f"{reverse('chat:session', args=[message.session_id])}#m{message.pk}")


@login_required
@require_GET
def my_questions(request):
    return render(request, "routing/mine.html", {"questions": selectors.questions_asked_by(user=request.user)[:100]})


# How many of each kind the bell's list shows (the inbox and "My questions" list them all).
WHATS_NEW_LIMIT = 20


@login_required
@require_GET
def whats_new(request):
    """The bell's list: answers to the person's questions they have not read yet, and what waits for
    them as an owner (open questions and review items, verified knowledge to re-verify)."""
    user = request.user
    has_inbox = policy.has_inbox(user=user)
    counts = nav_figures(user)
    unread = selectors.unread_answers(user=user).select_related("tag", "answered_by").order_by("-answered_at", "-id")
    return render(
        request,
        "routing/whats_new.html",
        {
            "answers": unread[:WHATS_NEW_LIMIT],
            "unread_count": counts["unread_answers"],
            "has_inbox": has_inbox,
            "rows": selectors.inbox_rows(user=user, limit=WHATS_NEW_LIMIT) if has_inbox else [],
            "review_items": knowledge.needs_review_items(user)[:WHATS_NEW_LIMIT] if has_inbox else [],
            "waiting_count": counts["inbox_open"],
        },
    )


@login_required
def notification_settings(request):
    """The signed-in person's own notification preferences (there is no way to name anyone else's)."""
    if request.method not in ("GET", "POST"):
        return HttpResponse(status=405)
    user = request.user
    has_inbox = policy.has_inbox(user=user)
    pref = NotificationPreference.objects.filter(user=user).first() or NotificationPreference(user=user)
    form = NotificationPreferenceForm(
        request.POST if request.method == "POST" else None, instance=pref, has_inbox=has_inbox
    )
    if request.method == "POST":
        if form.is_valid():
            form.save()
            messages.success(request, "Notification settings saved.")
            return redirect("routing:notifications")
    return render(
        request,
        "routing/notifications.html",
        {"form": form, "has_inbox": has_inbox, "pref": pref},
        status=400 if form.errors else 200,
    )


# ------------------------------------------------------------------------------------- verified knowledge

KNOWLEDGE_FILTERS = [("needs_review", "Needs review"), ("verified", "Verified"), ("retired", "Retired"), ("all", "All")]


@login_required
@require_GET
def knowledge_list(request):
    """Verified knowledge of the tags the person owns (admins: all), filtered by status."""
    user = request.user
    if not policy.has_inbox(user=user):
        raise Http404("No verified knowledge.")
    status = request.GET.get("status") or "all"
    if status not in dict(KNOWLEDGE_FILTERS):
        status = "all"
    answers = policy.verified_answers(user=user).select_related("tag", "verified_by")
    counts = {key: answers.filter(status=key).count() for key, _ in KNOWLEDGE_FILTERS if key != "all"}
    if status != "all":
        answers = answers.filter(status=status)
    return render(
        request,
        "routing/knowledge.html",
        {
            "answers": answers.order_by("status", "-verified_at")[:200],
            "status": status,
            "filters": [(key, label, counts.get(key, sum(counts.values()))) for key, label in KNOWLEDGE_FILTERS],
        },
    )


@login_required
def knowledge_detail(request, verified_id):
    """One verified answer: why it needs review, its sources then and now; re-verify, edit, retire."""
    verified = knowledge.knowledge_for_user(user=request.user, verified_id=verified_id)
    form = KnowledgeEditForm(initial={"question": verified.question, "answer": verified.answer})
    if request.method == "POST":
        form = KnowledgeEditForm(request.POST)
        if form.is_valid():
            try:
                knowledge.edit(
                    verified=verified,
                    user=request.user,
                    question=form.cleaned_data["question"],
                    answer=form.cleaned_data["answer"],
                )
            except knowledge.VerifiedNotFound as e:
                raise Http404("No such verified answer.") from e
            except knowledge.KnowledgeError as e:
                form.add_error(None, str(e))
            else:
                messages.success(request, "Saved and verified by you: the new text is being indexed.")
                return redirect("routing:knowledge_detail", verified_id=verified.pk)
    elif request.method != "GET":
        return HttpResponse(status=405)
    return render(
        request,
        "routing/knowledge_detail.html",
        {
            "v": verified,
            "form": form,
            "sources": knowledge.sources_of(verified),
            "editable": verified.status != VerifiedAnswer.Status.RETIRED,
        },
    )


def _knowledge_action(request, verified_id, action, success) -> HttpResponse:
    """Run a lifecycle action (re-verify, retire) on a verified answer the person looks after, and
    say how it went on its page; `success(verified)` is the message once it is done."""
    verified = knowledge.knowledge_for_user(user=request.user, verified_id=verified_id)
    try:
        action(verified=verified, user=request.user)
    except knowledge.VerifiedNotFound as e:
        raise Http404("No such verified answer.") from e
    except knowledge.KnowledgeError as e:
        messages.error(request, str(e))
    else:
        messages.success(request, success(verified))
    return redirect("routing:knowledge_detail", verified_id=verified.pk)


@login_required
@require_POST
def knowledge_reverify(request, verified_id):
    return _knowledge_action(
        request,
        verified_id,
        knowledge.reverify,
        lambda v: f"Verified again by you; next review by {shown_date(v.review_by)}.",
    )


@login_required
@require_POST
def knowledge_retire(request, verified_id):
    return _knowledge_action(
        request, verified_id, knowledge.retire, lambda v: "Retired: the assistant no longer finds or cites it."
    )


# ----------------------------------------------------------------------------------- knowledge-gap report

UNTAGGED = "_untagged"  # the report of "no tag" (admins): a value no tag's slug is given


def _report_for(request, slug: str):
    """The report the viewer asked for, or 404 (a tag that is not theirs looks like no tag at all)."""
    try:
        tag = figures.report_tag(user=request.user, slug="" if slug == UNTAGGED else slug)
    except LookupError as e:
        raise Http404("No such report.") from e
    form = ReportPeriodForm(request.GET or None)
    since, until, key = form.bounds(now=timezone.now())
    return tag, form, key, figures.tag_report(user=request.user, tag=tag, since=since, until=until)


def _period_query(form: ReportPeriodForm, key: str) -> str:
    """The query string of the period `form.bounds` chose."""
    if key != "custom":
        return urlencode({"period": key})
    return urlencode({"period": key, "start": form.cleaned_data["start"], "end": form.cleaned_data["end"]})


@login_required
@require_GET
def report(request, slug):
    tag, form, key, data = _report_for(request, slug)
    return render(
        request,
        "routing/report.html",
        {
            "r": data,
            "form": form,
            "period_key": key,
            "report_slug": slug,
            "tags": [(s or UNTAGGED, name) for s, name in figures.figure_tags(user=request.user)],
            "questions_chart": charts.questions_chart(data),
            "waits_chart": charts.waits_chart(data),
            "wait_bins": charts.wait_bins(data.waits),
            "outcomes": figures.OUTCOMES,
            "top_cited": data.cited[0].answers if data.cited else 0,
            # The CSV of the period shown: bad input is told and the last 30 days shown instead.
            "csv_query": _period_query(form, key),
            "grace_days": figures.NEVER_CITED_GRACE_DAYS,
            "untagged_slug": UNTAGGED,
        },
    )


@login_required
@require_GET
def report_csv(request, slug):
    tag, form, key, data = _report_for(request, slug)
    if request.GET and not form.is_valid():
        errors = "; ".join(e for errs in form.errors.values() for e in errs)
        return HttpResponse(f"Invalid period: {errors}", status=400, content_type="text/plain; charset=utf-8")
    name = f"knowledge-gap-{data.slug or 'no-tag'}-{data.since:%Y-%m-%d}-to-{data.until:%Y-%m-%d}.csv"
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    exports.report_csv(data, response)
    return response


@login_required
@require_POST
def feedback(request, message_id):
    """The asker's vote on an answer (htmx: returns the vote bar's replacement). vote=1|-1|0 (undo);
    a down vote with reason (and an optional comment) becomes a review item."""
    message = policy.message_in_own_session(user=request.user, message_id=message_id)
    if message is None:  # not the asker's own answer: absent and forbidden look alike
        raise Http404("No such answer.")
    raw = request.POST.get("vote", "")
    try:
        vote = int(raw)
    except ValueError:
        vote = 99
    try:
        fb = services.feedback_vote(
            user=request.user,
            message=message,
            vote=vote,
            reason=request.POST.get("reason", ""),
            comment=request.POST.get("comment", ""),
        )
    except services.QuestionNotFound as e:
        raise Http404("No such answer.") from e
    except services.RoutingError as e:
        if not request.htmx:
            return _back_to_answer(request, message, messages.ERROR, str(e))
        fb = presenters.feedback_of([message]).get(message.pk)
        ctx = {**presenters.feedback_context(message, fb, editing=vote == -1), "fb_error": str(e)}
        # htmx swaps only successful responses: the bar comes back with the message in it.
        return HttpResponse(render_partial("chat/_feedback.html", {**ctx, "csrf_token": get_token(request)}))
    if not request.htmx:
        return _back_to_answer(request, message, messages.SUCCESS, "Thanks for the feedback.")
    # The reason form it opens posts without script too: it holds the page's token.
    ctx = {**presenters.feedback_context(message, fb), "csrf_token": get_token(request)}
    return HttpResponse(render_partial("chat/_feedback.html", ctx))


def _review_question(request, question_id) -> RoutedQuestion:
    question = selectors.question_for_user(user=request.user, question_id=question_id)
    if question.origin != RoutedQuestion.Origin.FEEDBACK:
        raise Http404("No such review item.")
    return question


@login_required
@require_POST
def review_outdated(request, question_id):
    """Resolve a review item: one of its cited documents (that the owner may read) is outdated. It
    asks first: a post without confirm=1 answers with what marking it will affect (the verified
    answers that go to "Needs review", the answers whose citation of it will warn) and a button that
    confirms; in place of the card with htmx, as a page of its own without script. A note is
    required: without one the form comes back saying so, its document still chosen."""
    question = _review_question(request, question_id)
    document_id = request.POST.get("document", "")
    note = request.POST.get("note", "")[:2000].strip()
    act = request.POST.get("confirm") == "1" and bool(note)
    back = reverse("routing:question", args=[question.pk])
    try:
        if act:
            document = services.review_mark_outdated(
                question=question, user=request.user, document_id=document_id, note=note
            )
        else:
            document, effect = services.review_outdated_effect(
                question=question, user=request.user, document_id=document_id
            )
    except services.QuestionNotFound as e:
        raise Http404("No such document.") from e
    except services.RoutingError as e:
        messages.error(request, str(e))
        return redirect_after_post(request, back)
    if act:
        messages.success(
            request, f"“{document.title}” is marked outdated: its citations show a warning, and its uploader was told."
        )
        return redirect_after_post(request, back)
    context = {
        "q": question,
        "review": {"documents": services.cited_documents_for(question=question, user=request.user)},
        "selected": document,
        "note": note,
        "effect": effect if note else None,
        "error": "" if note else services.MSG_OUTDATED_NOTE,
    }
    if request.htmx:  # htmx swaps a 200 only: the card, asking or saying what to fix
        return render(request, "routing/_outdated_card.html", context)
    return render(request, "routing/outdated_confirm.html", context, status=200 if note else 400)


@login_required
@require_POST
def review_dismiss(request, question_id):
    """Resolve a review item without a change; the note shows on the asker's "My questions"."""
    question = _review_question(request, question_id)
    try:
        services.review_dismiss(question=question, user=request.user, note=request.POST.get("note", ""))
    except services.QuestionNotFound as e:
        raise Http404("No such question.") from e
    except services.RoutingError as e:
        messages.error(request, str(e))
        return redirect("routing:question", question_id=question.pk)
    messages.success(request, "Review item dismissed with your note.")
    return redirect("routing:inbox")
