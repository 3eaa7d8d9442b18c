"""`manage.py backup` and `manage.py restore` through the Qdrant-server path (QDRANT_URL): every
process of the instance (ingestion, the web server, the backup, the restore) reaches the vector
store over HTTP with qdrant-client's REST transport, and the backup runs while the server serves.

No Qdrant server binary can be installed on this machine (tests/fakes/qdrant_server.py says why);
the store is the stand-in there: Qdrant's REST API answered by qdrant-client's local mode, with
every request and answer checked against qdrant-client's own models. The wipe replaces it with an
empty one at the same address, so whatever comes back came from the archive.
"""

from __future__ import annotations

import json
import shutil
import tarfile

import httpx
import pytest

from ragchat.evaluation.docgen import lorem_sentences, make_text
from tests.browser.conftest import LiveServer
from tests.fakes.qdrant_server import QdrantStandIn
from tests.ops.test_backup import POPULATE, snapshot

POINTS = """
import json
from asgiref.sync import async_to_sync
from ragchat import runtime
from documents.models import Document

async def points(document_id):
    return await (await runtime.ready_vector_service()).count(document_id=document_id)

rows = [(d.original_filename, d.status, d.chunk_count, async_to_sync(points)(str(d.pk))) for d in Document.objects.all()]
print('POINTS', json.dumps(sorted(rows)))
runtime.reset()
"""


def points(site: LiveServer) -> list[list]:
    """Each document's name, status, chunk count and the points the store holds for it."""
    return json.loads(site.shell(POINTS).split("POINTS ", 1)[1].splitlines()[0])


@pytest.fixture
def qdrant():
    stand_in = QdrantStandIn().start()
    yield stand_in
    stand_in.stop()


def test_backup_while_serving_then_restore_through_a_qdrant_server(tmp_path, ollama_server, qdrant):
    site = LiveServer(data_dir=tmp_path / "site", ollama_url=ollama_server.url, extra_env={"QDRANT_URL": qdrant.url})
    site.data_dir.mkdir()
    site.manage("migrate", "-v0")
    site.create_user("root", "pw-root-123", superuser=True)
    site.create_tag("finance", "Finance", owner="root")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "parking.txt").write_bytes(
        make_text(["Contractors need parking permits from reception.", *lorem_sentences(30, seed=3)])
    )
    (folder / "travel.md").write_bytes(make_text(["# Travel", *lorem_sentences(60, seed=4)]))
    site.manage("ingest_folder", str(folder), "--tag", "finance")
    site.shell(POPULATE)
    before, stored = snapshot(site), points(site)
    assert before["counts"]["documents"] == 2 and before["top"]
    assert all(status == "ready" and chunks == held > 0 for _, status, chunks, held in stored), stored
    assert qdrant.requests.get("PUT /collections/(?P<name>[^/]+)/points$"), "ingestion wrote through the server"

    # With a Qdrant server the backup does not need the web server stopped: it runs beside it.
    site.start()
    try:
        assert httpx.get(site.url + "/health", timeout=30).status_code == 200
        done = site.manage("backup", str(tmp_path / "backups"), check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        site.stop()
    (archive,) = (tmp_path / "backups").glob("ragchat-backup-*.tar.gz")
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest["vector_store"]["backend"] == "server" and manifest["counts"] == before["counts"]
    assert qdrant.requests.get("POST /collections/(?P<name>[^/]+)/points/scroll$"), "exported through the server"

    # Wiped: the database and the originals, and the store (an empty server at the same address).
    shutil.rmtree(site.data_dir)
    site.data_dir.mkdir()
    qdrant.stop()
    qdrant.start()
    assert qdrant.collections() == []

    restored = site.manage("restore", str(archive), check=False)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert snapshot(site) == before  # counts, the originals' bytes, statuses, the same top results
    assert points(site) == stored  # every document with all its vectors, in the server's store
    assert qdrant.requests.get("PUT /collections/(?P<name>[^/]+)/points$"), "imported through the server"
