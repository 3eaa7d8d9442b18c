"""Chat pages: the session list (home), one session with its history, new / rename / delete.
Every view looks sessions up through their owner: another user's session is a 404."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chat import presenters, selectors, services
from chat.models import ChatSession, Message
from chat.signals import session_opened
from chat.turn_fragments import MSG_BUSY
from ragchat.htmx import redirect_after_post
from ragchat.middleware import refuses_null_characters


def _session_or_404(request, session_id):
    session = selectors.session_for_user(user=request.user, session_id=session_id)
    if session is None:
        raise Http404("No such chat.")
    return session


def _sidebar(request) -> dict:
    sessions, more = selectors.sidebar_sessions(user=request.user)
    return {"sessions": sessions, "more": more, "archived_count": selectors.archived_count(user=request.user)}


def _composer(request) -> dict:
    """What the question box says of itself: the length limit and why it cannot send."""
    return {"question_max_chars": settings.RAG.question_max_chars, "question_empty": services.MSG_EMPTY_QUESTION}


# A refused first question waits here for the landing page it is sent back to (post/redirect/get).
REFUSED_KEY = "chat_refused_question"


@login_required
@require_GET
def chat_home(request):
    """The landing page: the composer, ready for a new chat's first question (or a refused one,
    with its text and the reason, once)."""
    refused = request.session.pop(REFUSED_KEY, None) or {}
    return render(
        request,
        "chat/home.html",
        {
            **_sidebar(request),
            **_composer(request),
            "question": str(refused.get("question", "")),
            "problem": str(refused.get("problem", "")),
        },
    )


@refuses_null_characters  # question_problem says it, and the landing page keeps the question
@login_required
@require_POST
def session_new(request):
    """A new chat starts with its first question (the session page's websocket answers it): no
    question, no chat. A refused question goes back to the landing page with its text and the
    reason, by a redirect: reloading that page asks nothing again."""
    question = request.POST.get("question", "")
    problem = services.question_problem(question) if question.strip() else services.MSG_EMPTY_QUESTION
    if problem:
        request.session[REFUSED_KEY] = {"question": question, "problem": problem}
        return redirect("home")
    session, _ = services.session_start(user=request.user, question=question)
    return redirect("chat:session", session_id=session.pk)


@login_required
@require_GET
def session_detail(request, session_id):
    session = _session_or_404(request, session_id)
    session_opened.send(sender=ChatSession, session=session, user=request.user)
    messages = selectors.messages_as_seen_by(user=request.user, messages=selectors.session_messages(session=session))
    # A draft still streaming when the page was rendered: the websocket sends its current state.
    streaming = [m.pk for m in messages if m.status == Message.Status.STREAMING]
    versions = selectors.answer_versions(messages)
    routed = presenters.route_statuses(messages)
    feedback = presenters.feedback_of(messages)
    csrf_token = get_token(request)  # the answers' forms post without script too
    return render(
        request,
        "chat/session.html",
        {
            "session": session,
            **_sidebar(request),
            "message_html": [
                presenters.message_html(
                    m,
                    versions=versions.get(m.pk),
                    routed=routed.get(m.pk),
                    feedback=feedback.get(m.pk),
                    csrf_token=csrf_token,
                )
                for m in messages
            ],
            "sync_id": streaming[-1] if streaming else "",
            "start": bool(messages) and messages[-1].role == Message.Role.USER,
            **_composer(request),
            # Why a question offers no edit (chat.js says so where its Edit is pressed).
            "edit_reasons": {"last": services.MSG_EDIT_LAST, "routed": services.MSG_EDIT_ROUTED, "busy": MSG_BUSY},
        },
    )


@login_required
@require_GET
def session_search(request):
    """Search across one's own chats (titles and messages as the person sees them now). The
    sidebar's search box swaps the list in; without script it is a page of its own."""
    query = " ".join(request.GET.get("q", "")[:200].split())
    if request.htmx:
        # The sidebar's list: the matches, or the recent chats again when the box is emptied.
        ctx = {"sessions": selectors.sessions_search(user=request.user, query=query), "query": query}
        if not query:
            ctx = {**_sidebar(request), "query": ""}
        return render(request, "chat/_session_list.html", ctx)
    if not query:
        return redirect("home")
    return render(
        request,
        "chat/search.html",
        {**_sidebar(request), "results": selectors.sessions_search(user=request.user, query=query), "query": query},
    )


@login_required
@require_GET
def session_export(request, session_id, fmt: str):
    """The chat as Markdown or PDF, with its citations, as its owner sees it now."""
    from chat import exports

    session = _session_or_404(request, session_id)
    if fmt == "md":
        response = HttpResponse(
            exports.session_markdown(user=request.user, session=session), content_type="text/markdown; charset=utf-8"
        )
    else:
        response = HttpResponse(exports.session_pdf(user=request.user, session=session), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{exports.filename(session, fmt)}"'
    return response


@login_required
@require_POST
def session_rename(request, session_id):
    session = _session_or_404(request, session_id)
    services.session_rename(session=session, title=request.POST.get("title", ""))
    return redirect("chat:session", session_id=session.pk)


def _flag(request) -> bool:
    return request.POST.get("value", "1") != "0"


@login_required
@require_POST
def session_pin(request, session_id):
    session = _session_or_404(request, session_id)
    services.session_pin(session=session, pinned=_flag(request))
    return redirect("chat:session", session_id=session.pk)


@login_required
@require_POST
def session_archive(request, session_id):
    """Archived chats leave the sidebar (still searchable, listed on the archive page)."""
    session = _session_or_404(request, session_id)
    archived = _flag(request)
    services.session_archive(session=session, archived=archived)
    return redirect("chat:archived") if archived else redirect("chat:session", session_id=session.pk)


@login_required
@require_GET
def session_archived(request):
    return render(
        request, "chat/archived.html", {**_sidebar(request), "archived": selectors.archived_sessions(user=request.user)}
    )


@login_required
@require_http_methods(["GET", "POST"])
def session_delete(request, session_id):
    """GET: the page that asks first, where the chat menu's Delete leads without script; POST: delete.
    With script the menu asks in a dialog (data-confirm, static/js/confirm.js) and posts through
    htmx, which is sent home."""
    session = _session_or_404(request, session_id)
    if request.method == "GET":
        return render(request, "chat/delete.html", {"session": session})
    services.session_delete(session=session)
    return redirect_after_post(request, reverse("home"))
