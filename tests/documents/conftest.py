"""Users and tags for the documents tests: an admin, a tag owner, a member, an outsider."""

from __future__ import annotations

import pytest

from documents import services
from documents.models import Document


@pytest.fixture
def people(django_user_model):
    make = django_user_model.objects.create_user
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123", is_staff=True)
    return {
        "admin": admin,
        "owner": make("olga", "olga@example.com", "pw-olga-123"),
        "member": make("mark", "mark@example.com", "pw-mark-123"),
        "outsider": make("otto", "otto@example.com", "pw-otto-123"),
        "other_tenant": make("tina", "tina@example.com", "pw-tina-123", tenant_id="acme"),
    }


@pytest.fixture
def tags(people):
    finance = services.tag_create(
        tenant_id="default", name="Finance", owner=people["owner"], members=[people["member"]]
    )
    hr = services.tag_create(tenant_id="default", name="HR", owner=people["admin"])
    return {"finance": finance, "hr": hr, "public": services.tag_ensure_public(tenant_id="default")}


@pytest.fixture
def upload(people, tags, rag_runtime):
    """Store and ingest one file as the finance owner (tag slugs by name); returns the fresh Document."""

    def _upload(data: bytes, filename: str, *, tag_names=("finance",), user=None, report=None) -> Document:
        document = services.document_create(
            user=user or people["owner"], data=data, filename=filename, tags=[tags[name] for name in tag_names]
        )
        services.document_ingest_sync(document.id, report=report)
        document.refresh_from_db()
        return document

    return _upload


@pytest.fixture
def vectors(rag_runtime):
    """Synchronous calls over the process's vector service."""
    from asgiref.sync import async_to_sync

    from ragchat import runtime

    class Vectors:
        def count(self, **kwargs) -> int:
            async def run():
                return await (await runtime.ready_vector_service()).count(**kwargs)

            return async_to_sync(run)()

        def search(self, query: str, *, user_tags, tenant_id="default", limit=20):
            async def run():
                service = await runtime.ready_vector_service()
                return await service.search(query, user_tags=user_tags, tenant_id=tenant_id, limit=limit)

            return async_to_sync(run)()

    return Vectors()
