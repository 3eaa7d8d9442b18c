"""Chat pages: the session list (home), one session with its history, new / rename / delete.
Every view looks sessions up through their owner: another user's session is a 404."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from chat import presenters, selectors, services
from chat.models import ChatSession, Message
from chat.signals import session_opened


def _session_or_404(request, session_id):
    session = selectors.session_for_user(user=request.user, session_id=session_id)
    if session is None:
        raise Http404("No such chat.")
    return session


@login_required
@require_GET
def chat_home(request):
    return render(request, "chat/home.html", {"sessions": selectors.sessions_for_user(user=request.user)})


@login_required
@require_POST
def session_new(request):
    session = services.session_create(user=request.user, title=request.POST.get("title", ""))
    return redirect("chat:session", session_id=session.pk)


@login_required
@require_GET
def session_detail(request, session_id):
    session = _session_or_404(request, session_id)
    session_opened.send(sender=ChatSession, session=session, user=request.user)
    messages = selectors.messages_as_seen_by(user=request.user, messages=selectors.session_messages(session=session))
    # A draft still streaming when the page was rendered: the websocket sends its current state.
    streaming = [m.pk for m in messages if m.status == Message.Status.STREAMING]
    return render(
        request,
        "chat/session.html",
        {
            "session": session,
            "sessions": selectors.sessions_for_user(user=request.user),
            "message_html": [presenters.message_html(m) for m in messages],
            "sync_id": streaming[-1] if streaming else "",
        },
    )


@login_required
@require_POST
def session_rename(request, session_id):
    session = _session_or_404(request, session_id)
    services.session_rename(session=session, title=request.POST.get("title", ""))
    return redirect("chat:session", session_id=session.pk)


@login_required
@require_POST
def session_delete(request, session_id):
    session = _session_or_404(request, session_id)
    services.session_delete(session=session)
    return redirect("home")
