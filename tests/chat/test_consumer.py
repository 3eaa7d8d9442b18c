"""The chat websocket against the real ASGI app, the fake Ollama server and embedded Qdrant."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from chat import turn_prepare, turn_state, turn_stream, turns
from chat.models import ChatSession, Message
from ragchat import runtime
from ragchat.services.retrieval import STRATEGY_FIRST, STRATEGY_FOLLOW_UP
from tests.chat.conftest import EXPENSE_DOC, VACATION_DOC, open_tab

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drain_turns")]

VACATION_Q = "How many vacation days do employees get per year?"


@sync_to_async
def messages_of(session) -> list[Message]:
    return list(Message.objects.filter(session=session).order_by("id"))


async def ask_and_finish(tab, question: str) -> str:
    await tab.ask(question)
    final = await tab.until_final()
    await turns.wait_idle()
    return final


def frame_kind(frame: str) -> str:
    if 'class="msg msg-user" hx-swap-oob="true"' in frame and 'status-streaming" hx-swap-oob="true"' in frame:
        return "question+draft"
    if "-status" in frame and "msg-stage" in frame and frame.lstrip().startswith("<span"):
        return "stage:" + re.search(r"stage-(\w+)", frame).group(1)
    if '-body" class="msg-body md" hx-swap-oob="innerHTML"' in frame:
        return "tokens"
    if "composer-note" in frame:
        return "note"
    if 'class="msg msg-assistant status-' in frame:
        return "final"
    return "other"


async def test_answer_streams_in_order_and_is_stored(chat_session, corpus, fake_ollama):
    fake_ollama.reply_citing(2, words=8)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    final = await ask_and_finish(tab, VACATION_Q)
    kinds = [frame_kind(f) for f in tab.frames]
    kinds = [k for i, k in enumerate(kinds) if k != "tokens" or kinds[i - 1] != "tokens"]  # runs of tokens as one
    # The draft arrives saying "searching": no stage frame repeats it.
    assert kinds == ["note", "question+draft", "stage:generating", "tokens", "stage:rating", "final"]
    assert "Searching your documents" in tab.frames[1]

    user_msg, answer = await messages_of(chat_session)
    assert (user_msg.role, user_msg.content) == ("user", VACATION_Q)
    assert answer.role == "assistant" and answer.status == Message.Status.COMPLETE
    assert answer.reply_to_id == user_msg.pk
    assert "[SourceId:" in answer.content
    assert [c["document_id"] for c in answer.citations][:1] == [VACATION_DOC]
    assert set(answer.confidence) == {"overall", "retrieval", "coverage", "llm"}
    assert answer.confidence["llm"] == 80
    assert answer.action in ("CITE", "ROUTE")
    assert answer.model == "llama3.2"
    assert answer.query_strategy == STRATEGY_FIRST
    assert answer.retrieval_query == VACATION_Q
    assert {"embed", "search", "generate", "rate", "total"} <= set(answer.timings)
    assert answer.request_id and answer.error == ""
    assert answer.passages and all("snippet_full" in p for p in answer.passages)
    # The final render: numbered markers with cards, the sources list, the confidence breakdown.
    assert 'class="cite-marker"' in final and "Vacation Policy.pdf" in final
    assert "Confidence" in final and "Retrieval" in final and "Coverage" in final
    assert "[SourceId:" not in final
    session = await sync_to_async(ChatSession.objects.get)(pk=chat_session.pk)
    assert session.title.startswith("How many vacation days")
    await tab.close()


async def test_tokens_are_coalesced_into_few_frames(chat_session, corpus, fake_ollama):
    fake_ollama.reply(" ".join(f"word{i}" for i in range(300)) + " [SourceId: " + VACATION_DOC + ":0]")
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask_and_finish(tab, VACATION_Q)
    token_frames = [f for f in tab.frames if frame_kind(f) == "tokens"]
    assert 1 <= len(token_frames) < 100  # 600 streamed pieces
    await tab.close()


async def test_citation_markers_follow_first_use_and_drop_unknown_ids(chat_session, corpus, fake_ollama, settings):
    settings.RAG = replace(settings.RAG, rag_min_similarity_score=0.0)  # both documents in the prompt
    runtime.reset()  # the parts are built from the settings in force: rebuild them with this one
    unknown = "00000000-0000-4000-8000-000000000000:3"
    fake_ollama.reply(
        f"Meals are covered [SourceId: {EXPENSE_DOC}:0]. You get 25 days [SourceId: {VACATION_DOC}:0] "
        f"and a made-up rule [SourceId: {unknown}] and again [SourceId: {EXPENSE_DOC}:0]."
    )
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    final = await ask_and_finish(tab, "Are meals and vacation days covered by the expense and vacation policy?")
    _, answer = await messages_of(chat_session)
    assert [c["source_id"] for c in answer.citations] == [f"{EXPENSE_DOC}:0", f"{VACATION_DOC}:0"]
    body = re.search(r'-body" class="msg-body md">(.*?)</div>\s*<', final, re.S).group(1)
    assert re.findall(r'class="cite-marker"[^>]*>(\d+)<', body) == ["1", "2", "1"]
    assert unknown not in final, final[final.find(unknown) - 300 : final.find(unknown) + 50]
    assert "made-up rule and again" in body.replace("\n", " ")
    await tab.close()


async def test_follow_up_is_contextualised_and_retrieves_the_topic(chat_session, corpus, fake_ollama):
    fake_ollama.reply_citing(1)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask_and_finish(tab, VACATION_Q)
    await ask_and_finish(tab, "does it cover contractors?")
    rows = await messages_of(chat_session)
    follow_up = rows[-1]
    assert follow_up.query_strategy == STRATEGY_FOLLOW_UP
    assert "vacation" in follow_up.retrieval_query.lower()
    assert follow_up.passages[0]["document_id"] == VACATION_DOC
    # The history reached the model: the first question is in the follow-up's prompt.
    prompts = [r.body for r in fake_ollama.requests_to("/api/chat")]
    assert any(VACATION_Q in str(p) and "contractors" in str(p) for p in prompts)
    await tab.close()


async def test_greeting_is_answered_directly_and_never_routed(chat_session, corpus, fake_ollama):
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    final = await ask_and_finish(tab, "hello!")
    _, answer = await messages_of(chat_session)
    assert answer.status == "complete" and answer.action == "CITE" and answer.route_target is None
    assert answer.query_strategy == "smalltalk (direct reply)"
    assert fake_ollama.requests_to("/api/chat") == []
    assert "Confidence" not in final and "Ask the owner" not in final
    await tab.close()


@pytest.mark.parametrize(
    ("script", "status", "sentence"),
    [
        ("down", "failed", turns.MSG_UNAVAILABLE),
        ("unknown_model", "failed", turns.MSG_MODEL),
        ("timeout", "failed", turns.MSG_TIMEOUT),
        ("stall", "interrupted", turns.MSG_TIMEOUT),
        ("error_mid_stream", "interrupted", turns.MSG_UNAVAILABLE),
    ],
)
async def test_failure_keeps_question_partial_text_and_shows_passages(
    chat_session, corpus, fake_ollama, script, status, sentence
):
    fake_ollama.reply("Employees get 25 vacation days per year according to the vacation policy document here.")
    if script == "down":
        fake_ollama.refuse_connections()
    elif script == "unknown_model":
        fake_ollama.models(["nomic-embed-text"])
    elif script == "timeout":
        fake_ollama.first_token_delay(4)
    elif script == "stall":
        fake_ollama.stall_after(6, 4)
    elif script == "error_mid_stream":
        fake_ollama.error_mid_stream(6)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    final = await ask_and_finish(tab, VACATION_Q)
    user_msg, answer = await messages_of(chat_session)
    assert user_msg.content == VACATION_Q
    assert answer.status == status
    assert answer.error == sentence and sentence in final
    if status == "interrupted":
        assert answer.content.startswith("Employees get 25")
        assert "Employees get 25" in final and "incomplete" in final
    else:
        assert answer.content == ""
    # The passages found are shown as a cited search result, with retry and ask-the-owner.
    assert answer.passages and answer.passages[0]["document_id"] == VACATION_DOC
    assert "Passages found" in final and "Vacation Policy.pdf" in final
    assert f'name="retry" value="{answer.pk}"' in final and "Ask the owner" in final
    await tab.close()


async def test_retry_after_failure_answers_the_same_question(chat_session, corpus, fake_ollama):
    fake_ollama.refuse_connections()
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask_and_finish(tab, VACATION_Q)
    fake_ollama.accept_connections()
    fake_ollama.reply_citing(1)
    failed = (await messages_of(chat_session))[-1]
    await tab.send({"retry": str(failed.pk)})
    await tab.until_final()
    await turns.wait_idle()
    rows = await messages_of(chat_session)
    # The answer replaces the failed one: one question, one answer, on the page as in the database.
    assert [r.role for r in rows] == ["user", "assistant"]
    assert rows[1].status == "complete" and rows[1].reply_to_id == rows[0].pk
    assert any(f'<article id="m{failed.pk}" hx-swap-oob="delete">' in f for f in tab.frames)
    starts = [f for f in tab.frames if frame_kind(f) == "question+draft"]
    # The question is re-sent as an upsert (replaced in place, not appended twice).
    assert starts and f'id="m{rows[0].pk}" class="msg msg-user" hx-swap-oob="true"' in starts[-1]
    await tab.close()


async def test_a_pending_first_question_is_answered_when_the_page_connects(chat_session, corpus, fake_ollama):
    from chat import services

    fake_ollama.reply_citing(1)
    await sync_to_async(services.message_create_user)(session=chat_session, content=VACATION_Q)
    tab = await open_tab(chat_session.owner, chat_session.pk, query="start=1")
    assert await tab.connect()
    await tab.until_final()
    await turns.wait_idle()
    rows = await messages_of(chat_session)
    assert [(r.role, r.status) for r in rows] == [("user", "complete"), ("assistant", "complete")]
    await tab.close()
    # Connecting again starts nothing: the question has its answer, which the socket sends (a page
    # asks with ?start when it showed the question alone).
    tab = await open_tab(chat_session.owner, chat_session.pk, query="start=1")
    assert await tab.connect()
    shown = await tab.receive()
    assert f'id="m{rows[1].pk}" class="msg msg-assistant status-complete' in shown
    assert await tab.comm.receive_nothing(timeout=0.3)
    assert len(await messages_of(chat_session)) == 2
    await tab.close()


async def test_a_tab_that_connects_while_the_answer_winds_up_gets_the_stored_answer(
    chat_session, corpus, fake_ollama, monkeypatch
):
    """Between the final frame and the turn's end (its signals: rating, routing) a tab that connects
    (a page loaded mid-answer, ?sync) gets the stored answer, not the draft whose final frame it
    missed. The signals wait here until the late tab has connected."""
    fake_ollama.reply_citing(1)
    winding_up, go_on = asyncio.Event(), asyncio.Event()
    to_database = turns.database_sync_to_async

    def held(func):
        if func is not turns._signal_completed:
            return to_database(func)

        async def signals(*args, **kwargs):
            winding_up.set()
            await go_on.wait()
            return await to_database(func)(*args, **kwargs)

        return signals

    monkeypatch.setattr(turns, "database_sync_to_async", held)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await tab.ask(VACATION_Q)
    await tab.until_final()
    await asyncio.wait_for(winding_up.wait(), 10)
    answer = await Message.objects.filter(session=chat_session, role="assistant").alast()
    assert turn_state.active_turn(str(chat_session.pk)) is not None  # still winding up
    late = await open_tab(chat_session.owner, chat_session.pk, query=f"sync={answer.pk}")
    try:
        assert await late.connect()
        shown = await late.receive()
        assert f'id="m{answer.pk}" class="msg msg-assistant status-complete' in shown, shown[:300]
    finally:
        go_on.set()
    await turns.wait_idle()
    await tab.close()
    await late.close()


async def test_sockets_that_connect_together_share_their_trip_to_the_database_thread(
    chat_session, corpus, fake_ollama, other_user
):
    """A burst of handshakes: each socket's session (and a new chat's waiting question) is read in
    runs shared by the sockets that connect together, a stranger's refused among them."""
    from chat import consumers

    tabs = [await open_tab(chat_session.owner, chat_session.pk) for _ in range(6)]
    stranger = await open_tab(other_user, chat_session.pk)
    runs, items = consumers._connects.runs, consumers._connects.items
    opened = await asyncio.gather(*(tab.connect() for tab in [*tabs, stranger]))
    assert opened == [True] * 6 + [False]
    assert consumers._connects.items - items == 7 and consumers._connects.runs - runs < 7
    for tab in tabs:
        await tab.close()


async def test_a_start_socket_reads_its_pending_question_with_the_ownership_check(
    chat_session, corpus, fake_ollama, monkeypatch
):
    """A new chat's socket (?start) makes one trip to the database thread before it opens (the
    ownership check, which reads the pending question too) and one after (its turn prepared), so a
    burst of new chats does not queue two trips each behind everything else the thread does."""
    from channels.db import DatabaseSyncToAsync

    from chat import services

    trips: list[str] = []
    calls = DatabaseSyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        trips.append(getattr(self.func, "__name__", repr(self.func)))
        return await calls(self, *args, **kwargs)

    await sync_to_async(services.message_create_user)(session=chat_session, content=VACATION_Q)
    tab = await open_tab(chat_session.owner, chat_session.pk, query="start=1")
    monkeypatch.setattr(DatabaseSyncToAsync, "__call__", counted)
    assert await tab.connect()
    await tab.receive()  # the question and the answer's draft: the turn is prepared
    monkeypatch.setattr(DatabaseSyncToAsync, "__call__", calls)
    await tab.until_final()
    # (The first call of the process also closes what a dead process left streaming: not this socket's.)
    # With several processes (the Redis layer), whether another process writes an answer of the
    # chat is one more trip, before the turn starts.
    from ragchat import processes

    busy = ["answer_streaming_exists"] if processes.several_processes() else []
    assert trips[trips.index("get_user") :] == ["get_user", "_sessions_and_pending", *busy, "prepare_batch"], trips
    await tab.close()


async def test_a_stored_question_is_embedded_while_its_turn_is_prepared(chat_session, corpus, fake_ollama):
    """turn_start (a new chat's first question, a retry, a regenerate) embeds the question's search
    text while its draft waits for the database thread, as a new question does (turn_ask)."""
    import threading

    from channels.db import database_sync_to_async

    from chat import services
    from ragchat.services.retrieval import standalone_query

    question = await sync_to_async(services.message_create_user)(session=chat_session, content=VACATION_Q)
    embedder = runtime.rag_service().vector_service.embedder
    assert embedder.cached_query(standalone_query(VACATION_Q)) is None
    gate = threading.Event()
    busy = asyncio.ensure_future(database_sync_to_async(gate.wait)(30))  # the database thread, held
    start = asyncio.ensure_future(
        turns.turn_start(session_id=chat_session.pk, user=chat_session.owner, user_message=question)
    )
    try:
        for _ in range(50):  # the draft waits for the database thread; the embedding does not
            if embedder.cached_query(standalone_query(VACATION_Q)) is not None:
                break
            await asyncio.sleep(0.02)
        assert not start.done()
        assert embedder.cached_query(standalone_query(VACATION_Q)) is not None
    finally:
        gate.set()
        await busy
    await start
    await turns.wait_idle()


async def test_the_note_tells_the_page_what_became_of_its_question(chat_session, corpus, fake_ollama):
    fake_ollama.reply("slow " * 30)
    fake_ollama.token_delay(0.02)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await tab.ask("a?")
    assert 'data-outcome="refused"' in await tab.receive()
    await tab.ask(VACATION_Q)
    assert 'data-outcome="accepted"' in await tab.receive()
    await tab.ask("And what about expense reports?")
    await tab.until_final()
    await turns.wait_idle()
    assert any('data-outcome="busy"' in f for f in tab.frames)
    await tab.close()


async def test_closing_the_tab_mid_answer_still_stores_it(chat_session, corpus, fake_ollama):
    text = " ".join(f"part{i}" for i in range(40)) + f" [SourceId: {VACATION_DOC}:0]"
    fake_ollama.reply(text)
    fake_ollama.token_delay(0.02)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await tab.ask(VACATION_Q)
    while frame_kind(await tab.receive()) != "tokens":
        pass
    await tab.close()
    await asyncio.sleep(0.6)
    draft = (await messages_of(chat_session))[-1]
    assert draft.status == "streaming" and draft.content.startswith("part0")  # saved while streaming
    await turns.wait_idle()
    answer = (await messages_of(chat_session))[-1]
    assert answer.status == "complete" and answer.content == text
    assert answer.citations and answer.citations[0]["document_id"] == VACATION_DOC


async def test_two_tabs_both_see_the_answer_and_a_late_tab_catches_up(chat_session, corpus, fake_ollama):
    fake_ollama.reply("Twenty-five days " * 20 + f"[SourceId: {VACATION_DOC}:0]")
    fake_ollama.token_delay(0.01)
    first = await open_tab(chat_session.owner, chat_session.pk)
    second = await open_tab(chat_session.owner, chat_session.pk)
    assert await first.connect() and await second.connect()
    await first.ask(VACATION_Q)
    while frame_kind(await first.receive()) != "tokens":
        pass
    late = await open_tab(chat_session.owner, chat_session.pk)
    assert await late.connect()
    snapshot = await late.receive()
    assert "status-streaming" in snapshot and "Twenty-five" in snapshot
    finals = [await t.until_final() for t in (first, second, late)]
    assert all("Twenty-five days" in f and "status-complete" in f for f in finals)
    assert "question+draft" in [frame_kind(f) for f in second.frames]
    for t in (first, second, late):
        await t.close()


async def test_page_rendered_with_a_draft_syncs_it_on_connect(chat_session, corpus, fake_ollama):
    fake_ollama.reply_citing(1)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask_and_finish(tab, VACATION_Q)
    await tab.close()
    answer = (await messages_of(chat_session))[-1]
    tab = await open_tab(chat_session.owner, chat_session.pk, query=f"sync={answer.pk}")
    assert await tab.connect()
    frame = await tab.receive()
    assert f'id="m{answer.pk}"' in frame and "status-complete" in frame
    await tab.close()


@pytest.mark.parametrize(
    ("question", "expected"),
    [("a?", "too short"), ("  ", "too short"), ("x" * 2001, "too long")],
)
async def test_question_validation_sends_nothing(chat_session, corpus, fake_ollama, question, expected):
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await tab.ask(question)
    frame = await tab.receive()
    assert frame_kind(frame) == "note" and expected in frame
    assert await tab.comm.receive_nothing(timeout=0.3)
    assert await messages_of(chat_session) == []
    assert fake_ollama.requests == []
    await tab.close()


async def test_second_question_while_answering_is_refused(chat_session, corpus, fake_ollama):
    fake_ollama.reply("slow " * 30)
    fake_ollama.token_delay(0.02)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await tab.ask(VACATION_Q)
    await tab.ask("And what about expense reports?")
    await tab.until_final()
    await turns.wait_idle()
    assert any("wait until the current answer" in f for f in tab.frames)
    assert [m.role for m in await messages_of(chat_session)] == ["user", "assistant"]
    await tab.close()


async def test_another_users_session_is_refused(chat_session, other_user, rag_runtime):
    tab = await open_tab(other_user, chat_session.pk)
    assert not await tab.connect()


async def test_anonymous_is_refused(chat_session, rag_runtime):
    tab = await open_tab(None, chat_session.pk)
    assert not await tab.connect()


async def test_foreign_origin_is_refused(chat_session, rag_runtime):
    tab = await open_tab(chat_session.owner, chat_session.pk, origin="https://evil.example")
    assert not await tab.connect()


async def test_pushed_owner_answer_reaches_open_tabs(chat_session, other_user, rag_runtime):
    from chat import services

    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    message = await sync_to_async(services.message_create_owner_answer)(
        session=chat_session, author=other_user, content="Contractors get **no** paid vacation."
    )
    await services.message_broadcast(message=message)
    frame = await tab.receive()
    assert f'id="m{message.pk}"' in frame and "msg-owner" in frame
    assert "<strong>no</strong>" in frame and "Answer from mallory" in frame
    await tab.close()


LONG_REPLY = "Employees get twenty-five vacation days per year and more words follow here. " * 6


async def test_stop_keeps_what_streamed_marked_stopped(chat_session, corpus, fake_ollama):
    fake_ollama.reply(LONG_REPLY)
    fake_ollama.token_delay(0.03)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await tab.ask(VACATION_Q)
    while "twenty-five" not in await tab.receive():
        pass
    await tab.send({"stop": "1"})
    final = await tab.until_final()
    await turns.wait_idle()
    assert turn_state.active_turn(chat_session.pk) is None
    _, answer = await messages_of(chat_session)
    assert answer.status == Message.Status.INTERRUPTED and answer.error_type == "Stopped"
    assert answer.error == "You stopped this answer."
    assert "twenty-five" in answer.content and len(answer.content) < len(LONG_REPLY)
    assert ">Stopped</span>" in final and "You stopped this answer." in final and ">Regenerate</button>" in final
    # A new question is taken; a stop naming the stopped answer (a double click, or one delivered
    # late through the group) does not stop the new one.
    fake_ollama.token_delay(0.01)
    await tab.ask("And what about expense reports?")
    assert 'data-outcome="accepted"' in await tab.receive()
    await tab.send({"stop": "1", "answer": str(answer.pk)})
    final = await tab.until_final(timeout=30)
    assert 'data-status="complete"' in final, final[:300]
    await turns.wait_idle()
    await tab.close()


async def test_regenerate_keeps_the_earlier_answer_as_a_version(chat_session, corpus, fake_ollama):
    fake_ollama.reply("First answer.")
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask_and_finish(tab, VACATION_Q)
    _, first = await messages_of(chat_session)
    fake_ollama.reply("Second answer.")
    await tab.send({"regenerate": str(first.pk)})
    final = await tab.until_final()
    while "Second answer." not in final:  # the first answer re-rendered as an older version, first
        final = await tab.until_final()
    await turns.wait_idle()
    rows = await messages_of(chat_session)
    assert [(r.role, r.content) for r in rows] == [
        ("user", VACATION_Q),
        ("assistant", "First answer."),
        ("assistant", "Second answer."),
    ]
    assert rows[2].reply_to_id == rows[0].pk
    # The first answer turned into a hidden older version; the new one says "2 / 2".
    hidden = [f for f in tab.frames if f.startswith(f'<article id="m{first.pk}"') and " hidden>" in f]
    assert hidden and '<span class="ver-count">1 / 2</span>' in hidden[0]
    assert '<span class="ver-count">2 / 2</span>' in final
    # Follow-ups see only the latest version.
    from chat import selectors

    fake_ollama.reply("Third answer.")
    await tab.ask("And for part-time staff?")
    while "Third answer." not in await tab.until_final():  # routing may re-render an earlier answer first
        pass
    await turns.wait_idle()
    last_question = (await messages_of(chat_session))[3]
    history = await sync_to_async(selectors.session_history)(session_id=chat_session.pk, before=last_question)
    assert [h.content for h in history] == [VACATION_Q, "Second answer."]
    # Only the latest question's answer regenerates.
    await tab.send({"regenerate": str(rows[2].pk)})
    while "composer-note" not in (frame := await tab.receive()):
        pass
    assert "Only the answer to the latest question can be regenerated." in frame
    await tab.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("drain_turns")
async def test_edit_the_latest_question_and_ask_it_again(chat_session, corpus, fake_ollama):
    EDITED = VACATION_Q + " Answer in one sentence."
    fake_ollama.reply_citing(1)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask_and_finish(tab, VACATION_Q)
    question, first = await messages_of(chat_session)
    await tab.send({"regenerate": str(first.pk)})
    while "2 / 2" not in await tab.until_final():
        pass
    await turns.wait_idle()
    second = (await messages_of(chat_session))[2]
    # Edited: both answers (every version) leave the page, the question keeps its place, new text.
    fake_ollama.reply_citing(1, prefix="Edited answer.")
    tab.frames.clear()
    await tab.send({"question": f"  {EDITED}  ", "edit": str(question.pk)})
    final = await tab.until_final()
    while "Edited answer." not in final:
        final = await tab.until_final()
    await turns.wait_idle()
    rows = await messages_of(chat_session)
    assert [(r.pk, r.role, r.content) for r in rows[:1]] == [(question.pk, "user", EDITED)]
    assert [(r.role, r.reply_to_id) for r in rows[1:]] == [("assistant", question.pk)]
    assert rows[1].content.startswith("Edited answer.")
    frames = "".join(tab.frames)
    assert 'data-outcome="accepted"' in frames
    for gone in (first, second):
        assert f'<article id="m{gone.pk}" hx-swap-oob="delete">' in frames
    assert f'id="m{question.pk}"' in frames and EDITED in frames
    # Only the latest question can be edited; a refused edit changes nothing.
    fake_ollama.reply("Follow-up answer.")  # no citation: low confidence, sent to a person
    await ask_and_finish(tab, "And for part-time staff?")
    await turns.wait_idle()
    follow_up = (await messages_of(chat_session))[2]
    await tab.send({"question": "Changed?", "edit": str(follow_up.pk)})
    while "composer-note" not in (frame := await tab.receive()):
        pass
    assert "This question went to a person" in frame and 'data-outcome="refused"' in frame
    tab.frames.clear()
    await tab.send({"question": "Changed?", "edit": str(question.pk)})
    while "composer-note" not in (frame := await tab.receive()):
        pass
    assert "Only your latest question can be edited" in frame and 'data-outcome="refused"' in frame
    # Another session's question id is refused the same way.
    await tab.send({"question": "Changed?", "edit": "999999"})
    while "composer-note" not in (frame := await tab.receive()):
        pass
    assert "Only your latest question can be edited" in frame
    assert (await messages_of(chat_session))[0].content == EDITED
    await tab.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("drain_turns")
async def test_a_button_pressed_while_an_answer_runs_gets_a_please_wait_that_goes(chat_session, corpus, fake_ollama):
    fake_ollama.fail_with(500, times=None, paths=("/api/chat",))
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask_and_finish(tab, VACATION_Q)
    _, failed = await messages_of(chat_session)
    fake_ollama.reset()
    fake_ollama.reply_citing(1)
    fake_ollama.token_delay(0.2)
    await tab.ask("And for part-time staff?")
    while 'data-status="streaming"' not in await tab.receive():
        pass
    await tab.send({"retry": str(failed.pk)})
    while "composer-note" not in (frame := await tab.receive()) or "Please wait" not in frame:
        pass
    # The page clears a transient note once no answer is being written (chat.js).
    assert "data-transient" in frame and "data-outcome" not in frame
    await tab.until_final()
    await tab.close()


async def test_unsupported_sentence_is_stored_and_marked(chat_session, corpus, fake_ollama):
    """Issue 16 (A2): the grounding check is stored with the answer; the sentence no passage supports
    is marked on the page with its explanation, the supported one is not."""
    fake_ollama.reply(
        f"Every employee receives 25 vacation days per year [SourceId: {VACATION_DOC}:0]. "
        f"Vacation days can also be exchanged for a company car [SourceId: {VACATION_DOC}:0]."
    )
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    final = await ask_and_finish(tab, VACATION_Q)
    _, answer = await messages_of(chat_session)
    statuses = [s["status"] for s in answer.grounding["sentences"]]
    assert statuses == ["supported", "unsupported"]
    assert answer.grounding["supported_share"] == 0.5
    marked = re.findall(r'<span class="claim-unsupported">([^<]*)', final)
    assert marked == ["Vacation days can also be exchanged for a company car"]  # then its citation marker
    assert final.count('class="claim-flag"') == 1
    assert "No passage among this answer" in final
    await tab.close()
    # The page shows it again after a reload.
    from django.test import Client
    from django.urls import reverse

    client = Client()
    await sync_to_async(client.force_login)(chat_session.owner)
    page = await sync_to_async(client.get)(reverse("chat:session", args=[chat_session.pk]))
    assert '<span class="claim-unsupported">Vacation days can also be exchanged' in page.content.decode()


async def test_glossary_of_a_readable_tag_expands_the_search(chat_session, corpus, fake_ollama, settings):
    """Issue 16: a chat question naming a glossary term is searched by its other names too."""
    from documents.models import GlossaryTerm

    settings.RAG = replace(settings.RAG, rag_min_similarity_score=0.0)  # the hashing embedder's scale
    runtime.reset()
    from documents.services import tag_ensure_public

    public = await sync_to_async(tag_ensure_public)(tenant_id=chat_session.owner.tenant_id)
    await GlossaryTerm.objects.acreate(tag=public, term="PTO", aliases="vacation days; annual leave")
    fake_ollama.reply_citing(1)
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask_and_finish(tab, "How much PTO do I get?")
    _, answer = await messages_of(chat_session)
    assert answer.retrieval_query == "How much PTO do I get? (vacation days; annual leave)"
    assert answer.query_strategy == f"{STRATEGY_FIRST} + glossary"
    assert answer.passages[0]["document_id"] == VACATION_DOC
    await tab.close()


async def test_a_models_own_citation_style_and_thinking_reach_the_page_cleaned(
    chat_session, corpus, fake_ollama, settings
):
    """Issue 16: a small model cites "[1]", "[2]" and thinks aloud; the page streams, stores and
    numbers the canonical answer, and none of the thinking."""
    settings.RAG = replace(settings.RAG, rag_min_similarity_score=0.0)  # both documents in the prompt
    runtime.reset()
    fake_ollama.reply_citing(2)
    fake_ollama.habits(citations="numbered", thinks_aloud="Maybe 30 days? Check [1] first.")
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    final = await ask_and_finish(tab, "Are meals and vacation days covered by the expense and vacation policy?")
    _, answer = await messages_of(chat_session)
    assert answer.status == "complete" and len(answer.citations) == 2
    assert answer.content.count("[SourceId: ") == 3 and "[1]" not in answer.content
    # The first passage's first sentence ("... 25 vacation days per year.") is the model's too, and
    # uncited: ragchat attributes it to that passage.
    assert answer.content.count("; attributed]") == 1
    assert "think" not in answer.content and "30 days" not in answer.content and "30 days" not in final
    body = re.search(r'-body" class="msg-body md">(.*?)</div>\s*<', final, re.S).group(1)
    assert re.findall(r'class="cite-marker"[^>]*>(\d+)<', body) == ["1", "1", "2"]
    assert body.count("cite-by-ragchat") == 1
    # A reply that is all thinking is an error that keeps the passages, not an empty answer.
    fake_ollama.reply("<think>I cannot decide")
    fake_ollama.habits()
    final = await ask_and_finish(tab, "How many vacation days do I get per year?")
    *_, empty = await messages_of(chat_session)
    assert empty.content == "" and empty.error == turns.MSG_EMPTY and turns.MSG_EMPTY in final
    assert empty.passages and "Passages found" in final
    await tab.close()


async def test_questions_asked_together_share_one_trip_to_the_database_and_all_get_answers(
    user, corpus, fake_ollama, django_user_model
):
    """A burst: every question is stored once, in its own session, with its own draft and answer;
    those that arrive while a batch is being prepared are prepared together."""
    fake_ollama.reply_citing(2, words=6)
    sessions = [await sync_to_async(ChatSession.objects.create)(owner=user) for _ in range(6)]
    tabs = [await open_tab(user, s.pk) for s in sessions]
    for tab in tabs:
        assert await tab.connect()
    batches, asks = turn_prepare.preparer.runs, turn_prepare.preparer.items
    await asyncio.gather(*(tab.ask(f"{VACATION_Q} ({i})") for i, tab in enumerate(tabs)))
    finals = await asyncio.gather(*(tab.until_final() for tab in tabs))
    await turns.wait_idle()
    assert all('data-status="complete"' in final for final in finals)
    assert turn_prepare.preparer.items - asks == 6 and turn_prepare.preparer.runs - batches < 6
    for i, session in enumerate(sessions):
        question, answer = await messages_of(session)
        assert (question.role, question.content) == ("user", f"{VACATION_Q} ({i})")
        assert answer.reply_to_id == question.pk and answer.status == Message.Status.COMPLETE
        refreshed = await sync_to_async(ChatSession.objects.get)(pk=session.pk)
        assert refreshed.title.startswith("How many vacation days") and refreshed.title.endswith(f"({i})")
    for tab in tabs:
        await tab.close()


def test_a_batch_prepares_each_ask_as_alone_and_a_bad_ask_fails_only_itself(user, other_user, corpus):
    from chat import services

    mine = [ChatSession.objects.create(owner=user) for _ in range(2)]
    theirs = ChatSession.objects.create(owner=other_user)
    earlier = services.message_create_user(session=mine[1], content="Where is the office?")
    done = services.message_create_draft(reply_to=earlier)
    services.message_finish(message=done, fields={"content": "In Berlin.", "status": Message.Status.COMPLETE})
    asks = [
        turn_prepare.Ask(user=user, session_id=str(mine[0].pk), question="How many vacation days?"),
        turn_prepare.Ask(user=user, session_id=str(theirs.pk), question="Someone else's chat"),  # not the asker's
        turn_prepare.Ask(user=user, session_id=str(mine[1].pk), question="And parking?"),
    ]
    before = {s.pk: ChatSession.objects.get(pk=s.pk).updated_at for s in mine}
    first, refused, follow_up = turn_prepare.prepare_batch(asks)
    assert refused is None
    # Stored: the untitled chat named by its question, the named one kept, both moved to the top.
    stored = {s.pk: ChatSession.objects.get(pk=s.pk) for s in mine}
    assert [stored[s.pk].title for s in mine] == ["How many vacation days?", "Where is the office?"]
    assert all(stored[pk].updated_at > before[pk] for pk in before)
    assert ChatSession.objects.get(pk=theirs.pk).title == "New chat"
    assert not Message.objects.filter(session=theirs).exists()  # nothing stored in a chat not theirs
    assert first.question.content == "How many vacation days?" and first.draft.reply_to_id == first.question.pk
    assert first.inputs.history == [] and first.title == "How many vacation days?"
    assert [(m.role, m.content) for m in follow_up.inputs.history] == [
        ("user", "Where is the office?"),
        ("assistant", "In Berlin."),
    ]
    assert follow_up.title == "Where is the office?"  # named by its first question, not renamed
    alone = turn_prepare.prepare_batch([asks[2]])[0]  # the same ask alone: the same history and tags
    assert alone.inputs.history[:2] == follow_up.inputs.history and alone.inputs.tags == follow_up.inputs.tags

    # A question whose chat was deleted meanwhile (a regenerate racing a delete): its draft cannot
    # be stored, which fails the batch's transaction; each ask is then stored alone.
    gone = ChatSession.objects.create(owner=user)
    orphan = services.message_create_user(session=gone, content="Lost")
    gone.delete()
    ok, failed = turn_prepare.prepare_batch(
        [
            turn_prepare.Ask(user=user, session_id=str(mine[0].pk), question="Next question"),
            turn_prepare.Ask(user=user, session_id=str(gone.pk), message=orphan),
        ]
    )
    assert ok.question.content == "Next question" and isinstance(failed, Exception)
    assert Message.objects.filter(content="Next question").count() == 1


async def test_an_answer_paused_for_other_questions_streams_after_them_and_a_late_stop_keeps_it_whole(
    chat_session, corpus, fake_ollama
):
    """First tokens first: while another question waits for its first token, this answer pauses
    (after its first token, and before it is stored). A stop that reaches a finished answer while it
    waits to be stored keeps it whole: it came too late to cut anything."""
    fake_ollama.reply("Employees get twenty-five vacation days.")
    waiting = turn_state.Turn(session_id="other-1", message_id=0, question="q")
    turn_stream.first_tokens.begin(waiting)  # another question of the process waits for its first token
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await tab.ask(VACATION_Q)
    while "-body" not in await tab.receive():  # the first token went out; now the answer gives way
        pass
    state = turn_stream.first_tokens._state()
    for _ in range(100):
        if state.waiters:
            break
        await asyncio.sleep(0.01)
    assert len(state.waiters) == 1, "the answer pauses while the other question waits"
    # The other question gets its first token and, in the same instant, another starts waiting: a new
    # burst, in which the answer gives way once more (at its next token, or before it is stored).
    for n in range(2, 60):
        turn_stream.first_tokens.end(waiting)
        waiting = turn_state.Turn(session_id=f"other-{n}", message_id=0, question="q")
        turn_stream.first_tokens.begin(waiting)
        for _ in range(200):
            await asyncio.sleep(0.01)
            if state.waiters:
                break
        answering = turn_state.active_turn(chat_session.pk)
        if state.waiters and answering is not None and answering.stage == "rating":
            break  # rated and waiting to be stored
    assert state.waiters and turn_state.active_turn(chat_session.pk).stage == "rating"
    await tab.send({"stop": "1"})
    final = await tab.until_final()
    await turns.wait_idle()
    turn_stream.first_tokens.end(waiting)
    _, answer = await messages_of(chat_session)
    assert answer.status == Message.Status.COMPLETE and answer.error == ""
    # whole: the sentence with the citation ragchat attributes to it once it has ended
    assert re.sub(r"\s*\[SourceId: [^\]]*\]", "", answer.content) == "Employees get twenty-five vacation days."
    assert 'data-status="complete"' in final
    await tab.close()


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="the Redis channel layer (the PostgreSQL + Redis run)")
async def test_an_idle_tab_waits_on_redis_past_the_blocking_pop_and_still_gets_its_frames():
    """channels_redis waits for a message in 5 s blocking pops; redis-py 8 reads with a 5 s timeout by
    default, so the pop raced the read ("Timeout reading from ...") and daphne closed idle tabs'
    sockets with 1011. The layer reads without a timeout (settings.CHANNEL_LAYERS): a receive waits
    through several pops and gets the next frame."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    channel = await layer.new_channel()
    with pytest.raises(TimeoutError):  # asyncio's wait_for, not a Redis read timeout
        await asyncio.wait_for(layer.receive(channel), 11)
    await layer.send(channel, {"type": "chat.message", "n": 1})
    assert await asyncio.wait_for(layer.receive(channel), 5) == {"type": "chat.message", "n": 1}
