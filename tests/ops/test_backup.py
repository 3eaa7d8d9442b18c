"""`manage.py backup` then `manage.py restore` round-trip a populated instance (ragchat/management/backup.py):
real commands in subprocesses, real ingestion into the embedded store, a file SQLite database, and
a PostgreSQL database of its own through pg_dump/pg_restore (skipped when TEST_POSTGRES_URL's
server is not reachable). The
instance is wiped between the two; documents, chunks, chats, messages, users, the originals' bytes
and a search's top results must come back the same. Then the refusals: another embedding model, a
newer schema, a populated target without --replace.
"""

from __future__ import annotations

import json
import shutil
import tarfile

import httpx
import pytest

from ragchat.evaluation.docgen import lorem_sentences, make_text
from tests.browser.conftest import LiveServer

POPULATE = """
from documents.models import Document
from chat.models import ChatSession, Message
from ragchat.models import User
root = User.objects.get(username='root')
for n in range(2):
    session = ChatSession.objects.create(owner=root, title=f'Chat {n}')
    Message.objects.create(session=session, role='user', content='How many vacation days do I get?')
    Message.objects.create(session=session, role='assistant', content='Twenty-five days [1].')
"""

SNAPSHOT = """
import hashlib, json
from asgiref.sync import async_to_sync
from ragchat import runtime
from ragchat.management.backup import instance_counts
from documents.models import Document
async def top():
    service = await runtime.ready_vector_service()
    hits = await service.search('parking permits for contractors', user_tags=['finance'], limit=3)
    return [(h.source_id, round(h.score, 5)) for h in hits]
files = {d.original_filename: hashlib.sha256(d.file.read()).hexdigest() for d in Document.objects.all()}
statuses = sorted((d.original_filename, d.status, d.chunk_count) for d in Document.objects.all())
print('SNAPSHOT', json.dumps({'counts': instance_counts().as_dict(), 'top': async_to_sync(top)(), 'files': files,
                             'statuses': statuses}))
runtime.reset()
"""


def snapshot(site: LiveServer) -> dict:
    out = site.shell(SNAPSHOT)
    return json.loads(out.split("SNAPSHOT ", 1)[1].splitlines()[0])


@pytest.fixture(params=["sqlite", "postgresql"])
def instance(request, tmp_path, ollama_server, scratch_postgres):
    extra = {}
    if request.param == "postgresql":
        extra = {"DATABASE_URL": scratch_postgres("ragchat_backup"), "DB_CONN_MAX_AGE": "0"}
    return LiveServer(data_dir=tmp_path / "site", ollama_url=ollama_server.url, extra_env=extra)


def wipe(site: LiveServer) -> None:
    """Everything of the instance gone: database (emptied), vector store, originals."""
    if "postgres" in site.env["DATABASE_URL"]:
        site.manage("flush", "--noinput")
        site.manage("migrate", "documents", "zero", "--noinput")
    shutil.rmtree(site.data_dir)
    site.data_dir.mkdir()


# A dozen manage.py processes and a live server in a row: over pytest's 120 s when the CI passes run
# side by side on two cores.
def test_backup_then_restore_round_trips_a_populated_instance(tmp_path, instance):
    site = instance
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
    (folder / "expenses.txt").write_bytes(make_text(lorem_sentences(40, seed=5)))
    site.manage("ingest_folder", str(folder), "--tag", "finance")
    site.shell(POPULATE)
    before = snapshot(site)
    assert before["counts"]["documents"] == 3 and before["counts"]["chunks"] >= 3
    assert before["counts"]["messages"] == 4 and before["top"]
    assert all(status == "ready" for _, status, _ in before["statuses"])

    done = site.manage("backup", str(tmp_path / "backups"))
    assert "Backup written to" in done.stdout, done.stderr
    (archive,) = (tmp_path / "backups").glob("ragchat-backup-*.tar.gz")
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest["counts"] == before["counts"]
    assert manifest["vector_store"]["embedding_model"] == "hashing-384"

    wipe(site)
    restored = site.manage("restore", str(archive))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    after = snapshot(site)
    assert after == before  # counts, the originals' bytes, statuses, and the same top results

    # A populated target needs --replace; with it the restore runs again and ends the same.
    refused = site.manage("restore", str(archive), check=False)
    assert refused.returncode and "--replace" in refused.stderr
    site.manage("restore", str(archive), "--replace")
    assert snapshot(site) == before

    # Another embedding model than the backup's: refused before anything changes.
    other = LiveServer(
        data_dir=site.data_dir,
        ollama_url=site.env["OLLAMA_BASE_URL"],
        extra_env={
            **{k: site.env[k] for k in ("DATABASE_URL",)},
            "EMBEDDING_BACKEND": "ollama",
            "EMBEDDING_MODEL": "nomic-embed-text",
        },
    )
    refused = other.manage("restore", str(archive), "--replace", check=False)
    assert refused.returncode and "hashing-384" in refused.stderr and "nomic-embed-text" in refused.stderr
    assert "reindex" in refused.stderr

    # A backup from a newer schema: refused, upgrade first.
    newer = tmp_path / "newer.tar.gz"
    unpacked = tmp_path / "unpacked"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    manifest["migrations"]["documents"].append("9999_from_the_future")
    (unpacked / "manifest.json").write_text(json.dumps(manifest))
    with tarfile.open(newer, "w:gz") as tar:
        for item in unpacked.iterdir():
            tar.add(item, arcname=item.name)
    refused = site.manage("restore", str(newer), "--replace", check=False)
    assert refused.returncode and "newer ragchat" in refused.stderr and "9999_from_the_future" in refused.stderr
    assert snapshot(site) == before  # nothing was changed by the refusals

    # In embedded mode a running server holds the store: the backup says to stop it, and writes nothing.
    site.start()
    try:
        assert httpx.get(site.url + "/health", timeout=30).status_code == 200  # the server holds the store now
        refused = site.manage("backup", str(tmp_path / "while-serving"), check=False)
    finally:
        site.stop()
    assert refused.returncode and "stop the server first" in refused.stderr, refused.stderr
    assert not list((tmp_path / "while-serving").glob("*.tar.gz"))

    # Not a backup at all: a clear message.
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not an archive")
    refused = site.manage("restore", str(junk), "--replace", check=False)
    assert refused.returncode and "is not a ragchat backup" in refused.stderr
