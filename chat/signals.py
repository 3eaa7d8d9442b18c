"""Hooks other apps connect to (routing creates a RoutedQuestion for a ROUTE answer here).

answer_completed(sender=Message, message=Message): sent once per turn, after the assistant message
is stored in its final state (complete, interrupted or failed), from a worker thread (sync ORM ok).
"""

from django.dispatch import Signal

answer_completed = Signal()

# session_opened(sender=ChatSession, session=ChatSession, user=User): the owner opened the session's
# page (routing marks the answers delivered there as seen, clearing the unread badge).
session_opened = Signal()
