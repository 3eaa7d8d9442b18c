"""`ws/inbox/`: an owner's open inbox page. Auth is checked before accept(); the page joins only its
own user's group (the client cannot choose another: frames it sends are ignored), and each event is
re-checked against the user's inbox before anything is sent.

Frames out (htmx ws extension, as every live page): the question's row as an out-of-band fragment,
moved to the top of the list (or deleted once it has left the inbox), then the open count, the
navigation badge and the empty state (templates/routing/_inbox_live.html).
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.http import Http404

from ragchat.consumers import UserGroupConsumer
from ragchat.partials import render_partial
from routing import selectors
from routing.context_processors import nav_figures
from routing.notifications import user_group_name


def row_id(question) -> str:
    return f"inbox-g{question.group_id}" if question.group_id else f"inbox-q{question.pk}"


class NavConsumer(UserGroupConsumer):
    """`ws/nav/`: every page's navigation badges (what waits in an owner's inbox: open questions,
    review items, verified knowledge that needs review; answers from a person not yet seen by an
    asker), re-counted for the user whenever their group hears of a change."""

    def group_for(self, user) -> str:
        return user_group_name(user.pk)

    async def inbox_question(self, event):
        await self.nav_badges(event)

    async def nav_badges(self, event):
        await self.send(text_data=await self._badges())

    @database_sync_to_async
    def _badges(self) -> str:
        self.user.refresh_from_db(fields=["is_active", "is_superuser", "is_staff", "tenant_id"])
        return render_partial("routing/_nav_badges.html", nav_figures(self.user))


class InboxConsumer(NavConsumer):
    """`ws/inbox/`: the owner's inbox page (its rows, counts and badges)."""

    async def inbox_question(self, event):
        frame = await self._frame(event.get("question_id"))
        if frame is not None:
            await self.send(text_data=frame)

    @database_sync_to_async
    def _frame(self, question_id) -> str | None:
        self.user.refresh_from_db(fields=["is_active", "is_superuser", "is_staff", "tenant_id"])
        try:
            question = selectors.question_for_user(user=self.user, question_id=question_id)
        except Http404:
            return None  # not theirs (or gone): say nothing
        open_count = selectors.inbox_open_count(user=self.user)
        figures = nav_figures(self.user)
        rows = [r for r in selectors.inbox_rows(user=self.user) if row_id(r.question) == row_id(question)]
        return render_partial(
            "routing/_inbox_live.html",
            {
                "row": rows[0] if rows else None,
                "row_id": row_id(question),
                "open_count": open_count,
                "badge_count": figures["inbox_open"],  # re-verify items too
                "bell": figures["bell"],
            },
        )
