"""Editing a question names the chat again: a chat named after its first question takes the edited
text as its name; a name its asker gave it, and the name of a chat whose later question is edited,
stay."""

from __future__ import annotations

import pytest

from chat import services
from chat.models import ChatSession, Message

pytestmark = pytest.mark.django_db


def _edit(message: Message, text: str) -> tuple[list[int], str]:
    return services.question_edit(message=message, content=text)


def test_editing_the_first_question_renames_a_chat_named_after_it(user):
    session, question = services.session_start(user=user, question="How many vacation days do I get?")
    answer = Message.objects.create(session=session, role="assistant", reply_to=question, content="25.")
    removed, title = _edit(question, "How many vacation days do part-time employees get?")
    assert removed == [answer.pk]
    assert title == "How many vacation days do part-time employees get?"
    assert ChatSession.objects.get(pk=session.pk).title == title
    # Long texts are shortened as a first question's are.
    _, title = _edit(question, "Why " * 40)
    assert title.endswith("…") and len(title) == 60


def test_a_name_the_asker_gave_stays(user):
    session, question = services.session_start(user=user, question="How many vacation days do I get?")
    services.session_rename(session=session, title="My leave")
    assert _edit(question, "How many vacation days do part-time employees get?")[1] == ""
    assert ChatSession.objects.get(pk=session.pk).title == "My leave"


def test_editing_a_later_question_keeps_the_name(user):
    session, _ = services.session_start(user=user, question="How many vacation days do I get?")
    later = services.message_create_user(session=session, content="And do they carry over?")
    assert _edit(later, "Do they expire?")[1] == ""
    assert ChatSession.objects.get(pk=session.pk).title == "How many vacation days do I get?"
