"""Re-embed every document with the configured embedding model, into a new collection.

    manage.py reindex

After EMBEDDING_BACKEND / EMBEDDING_MODEL change, the store refuses to open (searches, ingestion,
/health and every indexing command say why) until this has run: the collection built with the old
model is deleted, one is created for the configured model, and every document is ingested again
from its original. Vectors of two models are never mixed in one collection.

With the in-process backend it indexes here, one document after another (in embedded mode run it
while the server is stopped); with RAGCHAT_INGEST_BACKEND=tasks it queues the documents for the
workers and returns. Run it again after an interruption: it starts over.
"""

from __future__ import annotations

import time

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from documents import services
from documents.management.commands._indexing import close_vector_store
from documents.models import Document
from documents.tasks import ingestion_enqueue
from ragchat import runtime
from ragchat.services.errors import EmbeddingError, VectorStoreError


class Command(BaseCommand):
    help = "Delete the vector collection and re-embed every document with the configured embedding model."

    def handle(self, *args, **options):
        started = time.perf_counter()
        to_workers = settings.RAGCHAT_INGEST_BACKEND == "tasks"
        quiet = options.get("verbosity", 1) == 0

        async def reindex():
            # One event loop for all of it: the Ollama embedder's client belongs to the loop it ran on.
            service = runtime.vector_service()
            wanted = await service.configured_meta()
            await service.drop()
            await runtime.ready_vector_service()  # a new, empty collection for the configured model
            documents = await sync_to_async(list)(Document.objects.order_by("created_at"))
            for document in documents:  # every document queued first: an interruption leaves them retryable
                await sync_to_async(services.document_requeue)(document=document)
            for document in tqdm(documents, unit="doc", desc="Re-embedding", disable=quiet):
                if to_workers:
                    await sync_to_async(ingestion_enqueue)(document.id)
                else:
                    await services.document_ingest(str(document.id))
            return wanted, len(documents)

        try:
            wanted, total = async_to_sync(reindex)()
        except EmbeddingError as e:
            raise CommandError(f"the configured embedding model cannot be used: {e}") from e
        except VectorStoreError as e:
            raise CommandError(
                f"the vector store cannot be reached or opened ({e}); in embedded mode stop the server first"
            ) from e
        finally:
            close_vector_store(settle=not to_workers)
        if to_workers:
            self.stdout.write(
                f"{total} documents queued for the workers to re-embed with {wanted.embedding_model!r} "
                f"({wanted.dimension} dims)."
            )
            return
        ready = Document.objects.filter(status=Document.Status.READY).count()
        failed = list(Document.objects.filter(status=Document.Status.FAILED).values_list("original_filename", "error"))
        self.stdout.write(
            f"Re-embedded {ready} of {total} documents with {wanted.embedding_model!r} ({wanted.dimension} dims) "
            f"in {time.perf_counter() - started:.1f} s."
        )
        for name, error in failed:
            self.stderr.write(f"failed: {name}: {error}")
        if failed:
            raise CommandError(f"{len(failed)} documents failed; retry them from the documents page")
