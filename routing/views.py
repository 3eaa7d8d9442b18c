"""Routing pages: the owner's inbox (with the R-ROUTE-7 figures), one question with its answer form,
the asker's "ask the owner" button, and the asker's list of their routed questions.

Every question is looked up through `question_for_user`: anyone but its owner and the admins gets a
404, on the page and on POST alike.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from access import policy
from chat import presenters
from chat.rendering import render_answer
from documents.models import PUBLIC_TAG_SLUG
from documents.selectors import with_outdated
from ragchat.partials import render_partial
from routing import selectors, services
from routing.forms import AnswerForm
from routing.models import RoutedQuestion


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
            "open_count": sum(r.askers for r in rows),
            "answered": answered,
            "figures": selectors.tag_figures(user=user),
            "is_admin": policy.is_admin(user),
            "window_days": selectors.FIGURES_WINDOW_DAYS,
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
                people = len(answered)
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
    # The conversation reads as the chat showed it: Markdown rendered, citations as numbered cards
    # (only entries whose every document the viewer may read are shown at all).
    conversation = [
        {
            "entry": entry,
            "html": render_answer(
                entry.message.content,
                known=entry.message.citations or [],
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
            "group": selectors.group_questions(question=question),
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
        },
    )


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
        tag = policy.uploadable_tags(user=request.user).filter(pk=raw if raw.isdigit() else -1).first()
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
        return HttpResponse(render_partial("routing/_escalated.html", {"error": str(e)}), status=400)
    html = render_partial("routing/_escalated.html", {"q": question})
    if request.htmx:
        return HttpResponse(html)
    messages.success(request, "Your question was sent.")
    return redirect("chat:session", session_id=message.session_id)


@login_required
@require_GET
def my_questions(request):
    return render(request, "routing/mine.html", {"questions": selectors.questions_asked_by(user=request.user)[:100]})


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
        fb = presenters.feedback_of([message]).get(message.pk)
        ctx = {**presenters.feedback_context(message, fb, editing=vote == -1), "fb_error": str(e)}
        # htmx swaps only successful responses: the bar comes back with the message in it.
        return HttpResponse(render_partial("chat/_feedback.html", ctx), status=200 if request.htmx else 400)
    if not request.htmx:
        messages.success(request, "Thanks for the feedback.")
        return redirect(f"{reverse('chat:session', args=[message.session_id])}#m{message.pk}")
    return HttpResponse(render_partial("chat/_feedback.html", presenters.feedback_context(message, fb)))


def _review_question(request, question_id) -> RoutedQuestion:
    question = selectors.question_for_user(user=request.user, question_id=question_id)
    if question.origin != RoutedQuestion.Origin.FEEDBACK:
        raise Http404("No such review item.")
    return question


@login_required
@require_POST
def review_outdated(request, question_id):
    """Resolve a review item: one of its cited documents (that the owner may read) is outdated."""
    question = _review_question(request, question_id)
    try:
        document = services.review_mark_outdated(
            question=question,
            user=request.user,
            document_id=request.POST.get("document", ""),
            note=request.POST.get("note", "")[:2000],
        )
    except services.QuestionNotFound as e:
        raise Http404("No such document.") from e
    except services.RoutingError as e:
        messages.error(request, str(e))
    else:
        messages.success(
            request, f"“{document.title}” is marked outdated: its citations show a warning, and its uploader was told."
        )
    return redirect("routing:question", question_id=question.pk)


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
