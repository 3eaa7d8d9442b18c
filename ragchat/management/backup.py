"""One archive holds a whole instance: the database, the vector store and the uploaded originals.

    manage.py backup DEST        DEST: an archive name (….tar.gz) or a folder to write one into
    manage.py restore ARCHIVE [--replace]

What goes in, and how:

- **the database**, with the engine's own tool, as a consistent snapshot: SQLite through its online
  backup API (a transactionally consistent copy even while the server writes, WAL included),
  PostgreSQL through `pg_dump -Fc` (one repeatable-read transaction). A restore goes back to the
  same engine (SQLite's backup API again; `pg_restore` into an emptied schema). Django's
  `dumpdata`/`loaddata` was the alternative: engine-neutral, but not a snapshot (model by model,
  outside one transaction), slow on message history, and it trips over content types and
  permissions; an engine change is a migration of its own, not a restore.
- **the vector store** as exported points (ids, dense vectors as float32, BM25 vectors, payloads),
  read through the store's own scroll: the same format from the embedded store and a Qdrant server,
  so a backup restores into either (an embedded instance moving to a server, too), and the restore
  re-creates the collection for the configured embedder before writing them back.
- **the originals** (MEDIA_ROOT), file by file.
- **manifest.json**: format, versions, the database's applied migrations, the embedding model and
  dimension the vectors were built with, and the counts (documents, chunks, chat sessions,
  messages, users) the restore checks itself against.

Consistency: the database is read first, then the vectors, then the files, and ingestion is held
for the first two (documents.ingest_hold): the backup waits for the documents being indexed to be
finished, and new ones wait, queued, until the vectors are exported, so every document is in the
backup as queued (indexed after the restore), failed, or ready with all its points. In embedded
mode the commands open the store, which one process alone can hold, so they run while the server
is stopped. Against PostgreSQL and a Qdrant server the backup can run while the app serves; a
document uploaded after the database snapshot may still add points once ingestion resumes, but not
before the export ends; the restore keeps only the points of documents it knows, whatever wrote them.

A restore refuses, before it changes anything, a backup whose vectors were built with another
embedding model or dimension than the one configured (the store would mix two models), one written
by a newer schema than this code knows (upgrade first), one from the other database engine, and a
target that already holds data unless --replace is given.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from documents.ingest_hold import HoldTimeout, ingestion_held
from ragchat import runtime
from ragchat.services.bm25 import SparseVec
from ragchat.services.vector_store.payload import PointData

FORMAT = 1
MANIFEST = "manifest.json"
DENSE_FILE = "vectors/dense.f32"  # float32, row-major, manifest's dimension per point
POINTS_FILE = "vectors/points.jsonl.gz"  # id, sparse vector, payload; one line per point, same order
MEDIA_DIR = "media"
BATCH = 512
HOLD_WAIT_SECONDS = 600.0


class BackupError(Exception):
    """A backup or restore refused or failed; the message says why and what to do."""


@dataclass
class Counts:
    documents: int
    chunks: int
    sessions: int
    messages: int
    users: int

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def instance_counts() -> Counts:
    from chat.models import ChatSession, Message
    from documents.models import Document
    from ragchat.models import User

    async def chunks() -> int:
        return await (await runtime.ready_vector_service()).count()

    return Counts(
        documents=Document.objects.count(),
        chunks=async_to_sync(chunks)(),
        sessions=ChatSession.objects.count(),
        messages=Message.objects.count(),
        users=User.objects.count(),
    )


def _version() -> str:
    try:
        return tomllib.loads((settings.BASE_DIR / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def _applied_migrations() -> dict[str, list[str]]:
    applied: dict[str, list[str]] = {}
    for app, name in sorted(MigrationRecorder(connection).applied_migrations()):
        applied.setdefault(app, []).append(name)
    return applied


def _vendor() -> str:
    return connection.vendor  # "sqlite" or "postgresql"


# ------------------------------------------------------------------------------------- database


def _pg_args_env() -> tuple[list[str], dict[str, str]]:
    db = settings.DATABASES["default"]
    args = [
        "-h",
        str(db.get("HOST") or "localhost"),
        "-p",
        str(db.get("PORT") or 5432),
        "-U",
        str(db.get("USER") or ""),
    ]
    env = {**os.environ}
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    return args + ["-d", str(db["NAME"])], env


def _run(command: list[str], env: dict[str, str]) -> None:
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise BackupError(
            f"{command[0]} is not installed (PostgreSQL's client tools: apt-get install postgresql-client)"
        ) from e
    if done.returncode:
        raise BackupError(f"{command[0]} failed: {done.stderr.strip()[-2000:]}")


def _dump_database(folder: Path) -> str:
    if _vendor() == "sqlite":
        target = folder / "database.sqlite3"
        source = sqlite3.connect(str(settings.DATABASES["default"]["NAME"]), timeout=30)
        copy = sqlite3.connect(str(target))
        try:
            source.backup(copy)  # SQLite's online backup: one consistent snapshot, WAL included
        finally:
            copy.close()
            source.close()
        return target.name
    args, env = _pg_args_env()
    _run(["pg_dump", "-Fc", "--no-owner", "--no-privileges", "-f", str(folder / "database.pgdump"), *args], env)
    return "database.pgdump"


def _restore_database(folder: Path, filename: str) -> None:
    connections.close_all()
    if _vendor() == "sqlite":
        source = sqlite3.connect(str(folder / filename))
        target = sqlite3.connect(str(settings.DATABASES["default"]["NAME"]), timeout=30)
        try:
            source.backup(target)  # replaces the whole database, schema included
        finally:
            target.close()
            source.close()
        return
    with connection.cursor() as cursor:  # an empty schema first: the dump brings its own tables
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"DROP TABLE IF EXISTS {connection.ops.quote_name(table)} CASCADE")
    connections.close_all()
    args, env = _pg_args_env()
    _run(
        [
            "pg_restore",
            "--no-owner",
            "--no-privileges",
            "--single-transaction",
            "--exit-on-error",
            *args,
            str(folder / filename),
        ],
        env,
    )


# ------------------------------------------------------------------------------------- vectors


def _export_vectors(folder: Path) -> dict[str, Any]:
    (folder / "vectors").mkdir()

    async def export() -> dict[str, Any]:
        service = await runtime.ready_vector_service()
        stats = await service.stats()
        written = 0
        with open(folder / DENSE_FILE, "wb") as dense, gzip.open(folder / POINTS_FILE, "wt", encoding="utf-8") as rest:
            async for batch in service.export_points(BATCH):
                np.asarray([p.dense for p in batch], dtype=np.float32).tofile(dense)
                for p in batch:
                    line = {"id": p.id, "sparse": [list(p.sparse.indices), list(p.sparse.values)], "payload": p.payload}
                    rest.write(json.dumps(line, ensure_ascii=False) + "\n")
                written += len(batch)
        return {
            "backend": stats["backend"],
            "collection": settings.RAG.qdrant_collection,
            "embedding_model": stats["embedding_model"],
            "dimension": stats["dimension"],
            "points": written,
        }

    return async_to_sync(export)()


def _import_vectors(folder: Path, dimension: int, known_documents: set[str]) -> int:
    dense = np.fromfile(folder / DENSE_FILE, dtype=np.float32).reshape(-1, dimension) if dimension else None

    async def restore() -> int:
        service = await runtime.ready_vector_service()
        await service.drop()  # the configured embedder's collection, empty
        await service.initialize()
        written, batch = 0, []
        with gzip.open(folder / POINTS_FILE, "rt", encoding="utf-8") as rest:
            for row, line in enumerate(rest):
                point = json.loads(line)
                if str(point["payload"].get("document_id")) not in known_documents:
                    continue  # indexed after the database snapshot (an online backup): not restored
                assert dense is not None
                indices, values = point["sparse"]
                batch.append(
                    PointData(
                        point["id"], dense[row].tolist(), SparseVec(tuple(indices), tuple(values)), point["payload"]
                    )
                )
                if len(batch) >= BATCH:
                    written += await service.import_points(batch)
                    batch = []
        written += await service.import_points(batch)
        return written

    return async_to_sync(restore)()


# ------------------------------------------------------------------------------------- backup


def backup(destination: str | os.PathLike[str], *, wait: float = HOLD_WAIT_SECONDS) -> tuple[Path, dict[str, Any]]:
    """Write one archive of the instance; returns its path and the manifest. Ingestion is held
    while the database and the vectors are read (documents.ingest_hold): the backup first waits
    up to `wait` seconds for the documents being indexed."""
    dest = Path(destination)
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    archive = dest if dest.name.endswith(".tar.gz") else dest / f"ragchat-backup-{stamp}.tar.gz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    if archive.exists():
        raise BackupError(f"{archive} exists already; name another archive")
    with tempfile.TemporaryDirectory(dir=archive.parent, prefix=".ragchat-backup-") as tmp:
        folder = Path(tmp)
        try:
            with ingestion_held(timeout=wait):  # the database and the vectors of one moment
                counts = instance_counts()  # opens the store: in embedded mode, refused while the server runs
                database_file = _dump_database(folder)
                vectors = _export_vectors(folder)
        except HoldTimeout:
            raise BackupError(
                f"documents were still being indexed after {wait:g} s of waiting; nothing was written. "
                "Try again when the upload queue is quiet, or give a longer --wait."
            ) from None
        media_root = Path(settings.MEDIA_ROOT)
        media_files = 0
        if media_root.is_dir():
            shutil.copytree(media_root, folder / MEDIA_DIR)
            media_files = sum(1 for p in (folder / MEDIA_DIR).rglob("*") if p.is_file())
        manifest = {
            "format": FORMAT,
            "created_at": timezone.now().isoformat(),
            "ragchat_version": _version(),
            "django_version": __import__("django").get_version(),
            "database": {"vendor": _vendor(), "file": database_file},
            "migrations": _applied_migrations(),
            "vector_store": vectors,
            "counts": {**counts.as_dict(), "chunks": vectors["points"]},
            "media_files": media_files,
        }
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2))
        partial = archive.with_name(archive.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            for item in sorted(folder.iterdir()):
                tar.add(item, arcname=item.name)
        os.replace(partial, archive)  # a finished archive or none: never a truncated one
    return archive, manifest


# ------------------------------------------------------------------------------------- restore


def read_manifest(archive: Path) -> dict[str, Any]:
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(MANIFEST)
            if member is None:
                raise KeyError(MANIFEST)
            return json.loads(member.read())
    except (OSError, tarfile.TarError, KeyError, json.JSONDecodeError) as e:
        raise BackupError(f"{archive} is not a ragchat backup ({type(e).__name__}: {e})") from e


def check_restorable(manifest: dict[str, Any], *, replace: bool) -> None:
    """Every reason to refuse, before anything is changed."""
    if manifest.get("format") != FORMAT:
        raise BackupError(f"backup format {manifest.get('format')!r}; this ragchat reads format {FORMAT}")
    vendor = manifest["database"]["vendor"]
    if vendor != _vendor():
        raise BackupError(
            f"this backup holds a {vendor} database and this instance runs {_vendor()}: restore into the same engine "
            "(set DATABASE_URL accordingly)"
        )
    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    newer = sorted(
        f"{app}.{name}" for app, names in manifest["migrations"].items() for name in names if (app, name) not in known
    )
    if newer:
        raise BackupError(
            f"this backup was written by a newer ragchat ({manifest.get('ragchat_version')}; migrations unknown here: "
            f"{', '.join(newer[:5])}{'…' if len(newer) > 5 else ''}). Upgrade this installation first, then restore."
        )
    stored = manifest["vector_store"]

    async def configured():
        return await runtime.vector_service().configured_meta()

    wanted = async_to_sync(configured)()
    if (stored["embedding_model"], int(stored["dimension"])) != (wanted.embedding_model, wanted.dimension):
        raise BackupError(
            f"the backup's vectors were built with embedding model {stored['embedding_model']!r} "
            f"({stored['dimension']} dims), but {wanted.embedding_model!r} ({wanted.dimension} dims) is configured; "
            "the store never mixes two models. Set EMBEDDING_BACKEND/EMBEDDING_MODEL to the backup's, restore, "
            "then change the model and run `manage.py reindex`."
        )
    if not replace:
        from documents.models import Document
        from ragchat.models import User

        try:
            holds = Document.objects.exists() or User.objects.exists()
        except Exception:  # no tables yet: a fresh instance
            holds = False
        if holds:
            raise BackupError("this instance already holds data; add --replace to overwrite it with the backup")


def restore(archive: str | os.PathLike[str], *, replace: bool = False) -> dict[str, Any]:
    """Restore an archive written by `backup`; returns the manifest and the counts found after."""
    archive = Path(archive)
    manifest = read_manifest(archive)
    check_restorable(manifest, replace=replace)
    work = Path(settings.DATA_DIR)
    with tempfile.TemporaryDirectory(dir=work, prefix=".ragchat-restore-") as tmp:
        folder = Path(tmp)
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(folder, filter="data")  # no absolute paths, no links out of the folder
        _restore_database(folder, manifest["database"]["file"])
        call_command("migrate", "--noinput", verbosity=0)  # a backup from an older schema is brought up to date
        from documents.models import Document

        known = {str(pk) for pk in Document.objects.values_list("pk", flat=True)}
        _import_vectors(folder, int(manifest["vector_store"]["dimension"]), known)
        media_root = Path(settings.MEDIA_ROOT)
        if media_root.exists():
            shutil.rmtree(media_root)
        if (folder / MEDIA_DIR).is_dir():
            shutil.copytree(folder / MEDIA_DIR, media_root)
        else:
            media_root.mkdir(parents=True, exist_ok=True)
    return {"manifest": manifest, "counts": instance_counts().as_dict()}
