"""Let the vector store finish what it builds lazily, so that filtered searches are fast.

    manage.py settle_index

The embedded store (Qdrant Edge) has no background optimizer: new chunks are searched by a plain
scan of full vectors until the store is settled into its segments with 8-bit vectors (on the
bench's 100k chunks: p50 about 7 ms settled, against about 24 ms). Settling blocks the whole
process while it runs (about 20 s at 100k chunks, nothing when little changed), so the server never
does it: the indexing commands (`demo_data`, `sync_folder`, `crawl_site`) do it as they finish, and
this command does it alone; in embedded mode run it while the server is stopped, e.g. before each
start (`make run` does, through `demo_data`). A Qdrant server (QDRANT_URL) settles by itself.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand

from documents.management.commands._indexing import close_vector_store, open_vector_store, settle_vector_store
from ragchat import runtime


class Command(BaseCommand):
    help = "Settle the vector store (segments, 8-bit vectors, graphs) so that filtered searches are fast."

    def handle(self, *args, **options):
        open_vector_store()
        try:
            seconds = settle_vector_store()
            stats = async_to_sync(runtime.vector_service().stats)()
        finally:
            close_vector_store(settle=False)
        self.stdout.write(f"Settled the vector store ({stats.get('points')} chunks) in {seconds:.1f} s.")
