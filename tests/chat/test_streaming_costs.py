"""What keeps many concurrent streams cheap, checked for behaviour: the incremental draft renderer
gives exactly the full render at every point of a stream; the batched partial save stores every
growing draft in one call and never touches a finished answer; the throttled in-memory channel layer
still delivers to a group."""

import pytest

from chat import services
from chat.layers import ThrottledInMemoryChannelLayer
from chat.models import Message
from chat.rendering import DraftRenderer, render_answer, settled_length
from ragchat.bench.fake_llm import numbered_tokens
from ragchat.fake_ollama import split_pieces

DOC = "3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c"
KNOWN = [
    {
        "source_id": f"{DOC}:{i}",
        "document_id": DOC,
        "document_name": f"Doc {i}",
        "chunk_index": i,
        "page_number": i,
        "section": "S",
        "relevance_score": 0.5,
        "snippet": "s" * 10,
        "snippet_full": "f" * 300,
    }
    for i in range(3)
]
ID0, ID1, ID2 = (k["source_id"] for k in KNOWN)

RICH = f"""## Vacation policy

Managers **approve** requests within five days [SourceId: {ID0}]. Deputies too [SourceId: {ID1}][SourceId: {ID1}].

- first item [SourceId: {ID2}]
- second item

1. step one

2. step two (a loose list: the blank lines change how step one reads)

- loose bullet

- another loose bullet

```python
x = 1

y = 2
```

| a | b |
|---|---|
| 1 | 2 |

> quoted

[SourceId: {ID0}] opens a paragraph, [SourceId: bad] vanishes, and [Sourc
"""


@pytest.mark.parametrize(
    "answer",
    [RICH * 2, numbered_tokens(120, markdown=True, source_ids=(ID0, ID1)), "one paragraph without breaks " * 30],
    ids=["rich-markdown", "bench-markdown", "single-paragraph"],
)
def test_incremental_draft_equals_full_render_at_every_piece(answer):
    renderer = DraftRenderer(prefix="m7")
    text = ""
    for piece in split_pieces(answer):
        text += piece
        assert renderer.render(text, known=KNOWN) == render_answer(text, known=KNOWN, prefix="m7", streaming=True).html
    # The settled part really is reused (else there is no saving) where the answer has safe breaks.
    if "\n\n" in answer:
        assert len(renderer.settled_text) > len(answer) // 2


def test_unsafe_block_starts_are_not_settled():
    assert settled_length("para\n\n- item") == 0  # a list may turn loose
    assert settled_length("para\n\n    code") == 0  # indented continuation
    assert settled_length("```\ncode\n\nmore") == 0  # inside an open fence
    assert settled_length("para\n\n") == 0  # the next block is unknown yet
    assert settled_length("para\n\nnext") == len("para\n\n")


def test_a_new_source_list_restarts_the_draft_renderer():
    renderer = DraftRenderer(prefix="m1")
    text = f"First [SourceId: {ID0}].\n\nSecond part"
    assert "cite-marker" not in renderer.render(text, known=[])
    assert "cite-marker" in renderer.render(text, known=KNOWN)


@pytest.mark.django_db
def test_partial_saves_batch_growing_drafts_and_leave_finished_answers(chat_session):
    question = services.message_create_user(session=chat_session, content="How many vacation days?")
    streaming = services.message_create_draft(reply_to=question)
    finished = services.message_create_draft(reply_to=question)
    services.message_finish(message=finished, fields={"content": "Final.", "status": Message.Status.COMPLETE})
    services.message_save_partials(contents={streaming.pk: "Twenty", finished.pk: "stale partial"})
    streaming.refresh_from_db()
    finished.refresh_from_db()
    assert (streaming.content, streaming.status) == ("Twenty", Message.Status.STREAMING)
    assert (finished.content, finished.status) == ("Final.", Message.Status.COMPLETE)


@pytest.mark.asyncio
async def test_throttled_in_memory_layer_delivers_to_every_group_member():
    layer = ThrottledInMemoryChannelLayer()
    a, b = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("chat.session.x", a)
    await layer.group_add("chat.session.x", b)
    for i in range(3):
        await layer.group_send("chat.session.x", {"type": "chat.fragment", "html": f"<p>{i}</p>"})
    for channel in (a, b):
        assert [(await layer.receive(channel))["html"] for _ in range(3)] == ["<p>0</p>", "<p>1</p>", "<p>2</p>"]
