"""Emails off the database thread.

Sending an email is a round trip to the mail server: 100 ms to seconds, and up to its timeout when
it hangs. Sync code that the server's event loop runs in a worker thread (`database_sync_to_async`,
a `transaction.on_commit` hook there, a sync view under daphne) runs on the thread that does the
process's database work (ragchat.live), so a send there held every chat's database work for that
long. Here such a send is queued to one mail thread, which sends the queued emails in the order they
were queued, and the caller goes on. Outside a running server (a management command, a worker
process, a sync test) the email is sent before the call returns, as before.

A queued email is sent with the email backend configured when it was queued. A failed send never
reaches the caller: it is handed to the caller's `failed` (on the mail thread when queued). Nothing
queued is lost when the process ends normally: the queue is sent to its end first (`_flush`, at
exit). `wait_sent` waits until what was queued so far has been sent (tests).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from django.core.mail import EmailMessage

from ragchat.live import server_loop

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_queue: ThreadPoolExecutor | None = None  # one worker: emails go out one at a time, in order
_queue_pid: int | None = None  # a forked child starts its own (the parent's thread is not there)


def send(message: EmailMessage, *, failed: Callable[[Exception], None]) -> None:
    """Send `message`: queued to the mail thread from a thread a running server loop runs sync code
    in, now otherwise. A failure is passed to `failed`, never raised."""
    try:
        message.get_connection()  # the backend configured now (it connects only when sending)
    except Exception as e:
        failed(e)
        return
    if server_loop() is not None:
        try:
            future = _mail_queue().submit(_send, message, failed)
        except RuntimeError:  # the interpreter is shutting down and takes no new threads
            pass
        else:
            future.add_done_callback(_log_crash)
            return
    _send(message, failed)


def _send(message: EmailMessage, failed: Callable[[Exception], None]) -> None:
    try:
        message.send(fail_silently=False)
    except Exception as e:  # a mail server outage must not undo what was done
        failed(e)


def _log_crash(future: Future) -> None:
    error = None if future.cancelled() else future.exception()
    if error is not None:  # `failed` itself raised
        logger.error("email failure handler failed: %s", error, extra={"event": "email_failure_handler_failed"})


def _mail_queue() -> ThreadPoolExecutor:
    global _queue, _queue_pid
    with _lock:
        if _queue is None or _queue_pid != os.getpid():
            _queue = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragchat-mail")
            _queue_pid = os.getpid()
        return _queue


def wait_sent(timeout: float = 10.0) -> bool:
    """Wait until every email queued before this call has been sent (or failed); False when that
    took longer than `timeout` seconds."""
    with _lock:
        queue = _queue if _queue_pid == os.getpid() else None
    if queue is None:
        return True
    try:
        marker = queue.submit(lambda: None)  # runs after everything queued before it
    except RuntimeError:  # shut down: the queue was sent to its end
        return True
    try:
        marker.result(timeout)
    except FutureTimeout:
        return False
    return True


@atexit.register
def _flush() -> None:
    """Send what is still queued before the process ends."""
    with _lock:
        queue = _queue if _queue_pid == os.getpid() else None
    if queue is not None:
        queue.shutdown(wait=True)
