"""The project's own wiring: pages, health, request ids, settings."""

import pytest
from django.conf import settings


@pytest.mark.django_db
def test_home_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/")


@pytest.mark.django_db
def test_home_renders_for_signed_in_user(client, django_user_model):
    user = django_user_model.objects.create_user(username="ana", password="pw-123456789")
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    assert b"ragchat" in response.content


@pytest.mark.django_db
def test_login_page_renders(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b"Sign in" in response.content


@pytest.mark.django_db
def test_request_id_header(client):
    response = client.get("/accounts/login/", HTTP_X_REQUEST_ID="abc-123")
    assert response["X-Request-ID"] == "abc-123"
    response = client.get("/accounts/login/", HTTP_X_REQUEST_ID="bad\nid")
    assert response["X-Request-ID"].startswith("req_")


def test_sqlite_uses_wal_and_immediate_transactions():
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.sqlite3":
        pytest.skip("PostgreSQL run")
    assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in db["OPTIONS"]["init_command"]
    assert "busy_timeout" in db["OPTIONS"]["init_command"]


def test_sqlite_connection_is_in_wal_mode(tmp_path, django_db_blocker):
    """A connection opened with the project's SQLite options is in WAL mode with a busy timeout."""
    from django.db.backends.sqlite3.base import DatabaseWrapper

    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.sqlite3":
        pytest.skip("PostgreSQL run")
    wrapper = DatabaseWrapper({**db, "NAME": str(tmp_path / "wal.sqlite3")}, alias="wal-check")
    try:
        with django_db_blocker.unblock(), wrapper.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            assert cursor.fetchone()[0].lower() == "wal"
            cursor.execute("PRAGMA busy_timeout")
            assert cursor.fetchone()[0] >= 5000
    finally:
        wrapper.close()
