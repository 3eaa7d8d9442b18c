"""A backup taken while a document is being indexed restores every document with all its vectors
(ragchat/management/backup.py, documents/ingest_hold.py).

One process, as the server runs it: real ingestion into the embedded store, in many small batches;
when half of the document's chunks are stored, a backup starts in another thread and gets a few
seconds while the ingestion waits. The archive is restored into a wiped instance: every document
must come back ready with exactly its chunk count of points (a backup that read the database in the
middle of the ingestion restores it "processing", with half its points).
"""

from __future__ import annotations

import json
import shutil

from ragchat.evaluation.docgen import lorem_sentences, make_text
from tests.browser.conftest import LiveServer
from tests.ops.conftest import SLOW_INGESTION_ENV

INGEST_DURING_BACKUP = """
import asyncio, json, threading
from pathlib import Path
from documents.models import Document, Tag
from documents.services import document_create, document_ingest
from ragchat.management.backup import backup
from ragchat.models import User

root = User.objects.get(username='root')
document = document_create(user=root, data=Path(DATA).read_bytes(), filename='handbook.txt',
                           tags=[Tag.objects.get(slug='finance')], check_permissions=False)
taken = {}

def take():
    taken['archive'] = str(backup(DEST)[0])

async def report(row):
    if row.stage.startswith('Indexed') and row.progress < 60 and 'thread' not in taken:
        taken['thread'] = threading.Thread(target=take)
        taken['thread'].start()
        await asyncio.to_thread(taken['thread'].join, 4)  # the backup's chance to read mid-ingestion

result = asyncio.run(document_ingest(document.pk, report=report))
taken['thread'].join()
print('DONE', json.dumps({'archive': taken['archive'], 'status': result.status, 'chunks': result.chunk_count}))
"""

RESTORED = """
import json
from asgiref.sync import async_to_sync
from ragchat import runtime
from documents.models import Document

async def points(document_id):
    return await (await runtime.ready_vector_service()).count(document_id=document_id)

rows = [(d.original_filename, d.status, d.chunk_count, async_to_sync(points)(str(d.pk))) for d in Document.objects.all()]
print('RESTORED', json.dumps(sorted(rows)))
runtime.reset()
"""


def test_a_backup_during_ingestion_restores_every_document_with_its_vectors(tmp_path, ollama_server):
    site = LiveServer(data_dir=tmp_path / "site", ollama_url=ollama_server.url, extra_env=SLOW_INGESTION_ENV)
    site.data_dir.mkdir()
    site.manage("migrate", "-v0")
    site.create_user("root", "pw-root-123", superuser=True)
    site.create_tag("finance", "Finance", owner="root")
    data = tmp_path / "handbook.txt"
    data.write_bytes(make_text(["Contractors need parking permits from reception.", *lorem_sentences(80, seed=7)]))
    code = f"DATA = {str(data)!r}\nDEST = {str(tmp_path / 'backups')!r}\n" + INGEST_DURING_BACKUP
    out = site.shell(code)
    done = json.loads(out.split("DONE ", 1)[1].splitlines()[0])
    assert done["status"] == "ready" and done["chunks"] > 8  # many batches: the backup came mid-way

    shutil.rmtree(site.data_dir)
    site.data_dir.mkdir()
    restored = site.manage("restore", done["archive"], check=False)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    rows = json.loads(site.shell(RESTORED).split("RESTORED ", 1)[1].splitlines()[0])
    assert rows == [["handbook.txt", "ready", done["chunks"], done["chunks"]]]
