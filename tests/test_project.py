"""The project's own wiring: pages, health, request ids, settings."""

import ast
import os
import re
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from django.conf import settings


@pytest.mark.django_db
def test_home_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/")


@pytest.mark.django_db
def test_an_htmx_action_after_the_session_ended_sends_the_browser_to_sign_in(client):
    """htmx follows a redirect inside its swap (the sign-in page inside the page): for an htmx request
    the sign-in redirect is htmx's own (HX-Redirect, a full page load), and `next` is the page the
    person was on (HX-Current-URL), not the action's address, and only when it is this site's path."""
    from django.urls import reverse

    login = reverse("login")
    action = "/documents/00000000-0000-0000-0000-000000000000/delete"
    htmx = {"HTTP_HX_REQUEST": "true"}

    response = client.post(action, **htmx, HTTP_HX_CURRENT_URL="http://testserver/documents/?tag=finance&q=a%20b")
    assert response.status_code == 200 and "Location" not in response
    assert response["HX-Redirect"] == f"{login}?next=/documents/%3Ftag%3Dfinance%26q%3Da%2520b"
    assert response.content == b""
    # A GET of a fragment (a row's refresh, a poll) too, and a current URL of another site, or one
    # that this site's host would turn into another's (//host), is not where sign-in leads back to.
    for current in ("https://evil.example/phish", "http://testserver//evil.example/phish", "/", ""):
        response = client.get(
            "/documents/00000000-0000-0000-0000-000000000000/row", **htmx, HTTP_HX_CURRENT_URL=current
        )
        assert response.status_code == 200 and response["HX-Redirect"] == login, current
    response = client.get(action, **htmx)  # no HX-Current-URL at all
    assert response["HX-Redirect"] == login
    # Not htmx: the redirect as before, back to the address asked for.
    response = client.get("/documents/?tag=finance")
    assert response.status_code == 302 and response.url == f"{login}?next=/documents/%3Ftag%3Dfinance"
    assert "HX-Redirect" not in response


@pytest.mark.django_db
def test_a_form_sent_after_the_session_ended_leads_back_to_its_page_after_sign_in(client, django_user_model):
    """Without script a form posts to its action's address, which answers only POST: signing in
    and being sent back there would end on a 405. The sign-in redirect of any non-GET request leads
    back to the page the form was on (the Referer, when it is this site's), or to the home page."""
    from django.urls import reverse

    login = reverse("login")
    action = "/documents/00000000-0000-0000-0000-000000000000/delete"
    response = client.post(action, HTTP_REFERER="http://testserver/documents/?tag=finance")
    assert response.status_code == 302 and response.url == f"{login}?next=/documents/%3Ftag%3Dfinance"
    for referer in ("https://evil.example/documents/", "http://testserver//evil.example/", None):
        response = client.post(action, **({"HTTP_REFERER": referer} if referer else {}))
        assert response.status_code == 302 and response.url == login, referer
    # Signed in again through that redirect, the person is back on the list, not on a 405.
    django_user_model.objects.create_user(username="ana", password="pw-123456789")
    response = client.post(
        f"{login}?next=/documents/%3Ftag%3Dfinance", {"username": "ana", "password": "pw-123456789"}, follow=True
    )
    assert response.status_code == 200 and response.redirect_chain[-1][0] == "/documents/?tag=finance"


@pytest.mark.django_db
def test_the_sign_in_page_says_why_when_a_page_sent_the_person_there(client):
    """Sent to sign in by a page (its session ended, or a link while signed out): the sign-in page
    says so; opened on its own, it does not."""
    sentence = "Sign in to continue: you will be taken back to the page you asked for."
    sent = client.get("/documents/", follow=True)
    assert sent.redirect_chain[-1][0] == "/accounts/login/?next=/documents/" and sentence in sent.content.decode()
    assert sentence not in client.get("/accounts/login/").content.decode()


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


# ------------------------------------------------------------------------------------- settings

ROOT = Path(__file__).resolve().parent.parent
# Read by Django itself or only set by the code, never a setting of ours.
NOT_SETTINGS = {"DJANGO_SETTINGS_MODULE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "PYTHONPATH"}


def _settings_file_reads() -> set[str]:
    """Names settings.py reads through django-environ: env("X"), env.str("X"), env.db("X"), …"""
    return set(re.findall(r"\benv(?:\.\w+)?\(\s*\"([A-Z][A-Z0-9_]*)\"", (ROOT / "ragchat" / "settings.py").read_text()))


def _os_environ_reads() -> dict[str, str]:
    """Names the project's code reads from os.environ / os.getenv (tests excepted), with where."""
    found: dict[str, str] = {}
    for package in ("ragchat", "chat", "documents", "routing", "access"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                name = None
                if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                    func = ast.unparse(node.func)
                    if func in {"os.environ.get", "os.getenv", "environ.get"}:
                        name = node.args[0].value
                elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                    if ast.unparse(node.value) == "os.environ" and isinstance(node.slice, ast.Constant):
                        name = node.slice.value
                if isinstance(name, str) and name not in NOT_SETTINGS:
                    found.setdefault(name, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _table_variables(text: str) -> set[str]:
    """The variables named in the first column of a Markdown table's rows."""
    rows = [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]
    return {name for cell in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", cell)}


def _configuration_table() -> set[str]:
    """The variables of docs/configuration.md's table."""
    return _table_variables((ROOT / "docs" / "configuration.md").read_text(encoding="utf-8"))


def test_every_setting_the_code_reads_is_in_the_configuration_table_and_nothing_else():
    from ragchat.services.config import RAGSettings

    read = {name: "ragchat/settings.py" for name in _settings_file_reads()}
    read |= {f.name.upper(): "ragchat/services/config.py (RAGSettings.from_env)" for f in fields(RAGSettings)}
    read |= _os_environ_reads()
    documented = _configuration_table()
    assert len(documented) > 40  # the table was found
    missing = sorted(f"{name} ({where})" for name, where in read.items() if name not in documented)
    assert not missing, "read by the code but not in docs/configuration.md's table: " + ", ".join(missing)
    unread = sorted(documented - set(read))
    assert not unread, "in docs/configuration.md's table but read nowhere: " + ", ".join(unread)


def test_the_readme_names_ten_settings_of_the_configuration_table():
    """The README's short table: the settings people change first, each one in the full table."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## The settings people change first\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) == 10, rows
    named = _table_variables(section)
    assert named and not named - _configuration_table(), sorted(named - _configuration_table())


def _load_settings(project: Path, **env: str) -> dict[str, str]:
    """Run ragchat/settings.py as a copy inside `project` (its BASE_DIR, where its .env is read) in a
    fresh interpreter, and return what it printed."""
    code = (
        "import runpy, sys\n"
        "ns = runpy.run_path(sys.argv[1])\n"
        "print('DATA_DIR=' + str(ns['DATA_DIR']))\n"
        "print('DB=' + str(ns['DATABASES']['default']['NAME']))\n"
        "print('QDRANT=' + ns['RAG'].qdrant_path)\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in _settings_file_reads() and k != "DJANGO_SETTINGS_MODULE"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(project / "ragchat" / "settings.py")],
        cwd=project.parent,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def test_dotenv_is_read_before_any_setting(tmp_path):
    project = tmp_path / "project"
    (project / "ragchat").mkdir(parents=True)
    shutil.copy(ROOT / "ragchat" / "settings.py", project / "ragchat" / "settings.py")
    (project / ".env").write_text("RAGCHAT_DATA_DIR=elsewhere/data\nDJANGO_DEBUG=true\n")

    loaded = _load_settings(project)
    data = project / "elsewhere" / "data"
    assert loaded["DATA_DIR"] == str(data)  # relative to the project, not to the working directory
    assert loaded["DB"] == str(data / "db.sqlite3")
    assert loaded["QDRANT"] == str(data / "qdrant")
    assert (data / "staticfiles").is_dir()

    # The environment wins over .env.
    elsewhere = str(tmp_path / "env-data")
    assert _load_settings(project, RAGCHAT_DATA_DIR=elsewhere)["DATA_DIR"] == elsewhere


# ------------------------------------------------------------------------------------- references


def _source_files() -> list[Path]:
    folders = ("ragchat", "chat", "documents", "routing", "access", "tests", "templates", "static")
    files = [f for name in folders for f in (ROOT / name).rglob("*") if f.suffix in {".py", ".html", ".js", ".css"}]
    return sorted(files) + [ROOT / "README.md"]


def test_requirement_ids_and_spec_sections_name_their_document():
    """A requirement ID or "spec v3" in a file comes with the path of the document that holds it (once
    per file), and no comment cites a seed by number (the documents in docs/specs have names)."""
    unfollowable = []
    for path in _source_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        where = str(path.relative_to(ROOT))
        if re.search(r"\bR-(?:CORE|RET|DOC|CHAT|ROUTE|OPS)-\d", text) and "docs/requirements.md" not in text:
            unfollowable.append(f"{where}: cites requirement IDs without docs/requirements.md")
        if re.search(r"\b[Ss]pec v3\b", text) and "docs/specs/rag-service-spec-v3-FINAL.md" not in text:
            unfollowable.append(f"{where}: cites spec v3 without docs/specs/rag-service-spec-v3-FINAL.md")
        if match := re.search(r"\b[Ss]eeds? \d{3}", text):
            unfollowable.append(f"{where}: cites {match.group(0)!r}, a number no document in the repository has")
    assert not unfollowable, "\n".join(unfollowable)


def test_every_docs_path_the_code_cites_exists():
    missing = sorted(
        f"{path.relative_to(ROOT)}: cites {cited}, which does not exist"
        for path in _source_files()
        for cited in set(re.findall(r"\bdocs/[\w./-]+\.md", path.read_text(encoding="utf-8", errors="replace")))
        if not (ROOT / cited).is_file()
    )
    assert not missing, "\n".join(missing)


def test_the_readme_figures_are_the_generated_ones():
    """Each row of the README's figures table (figure, value, command) is what that command last
    wrote to docs/benchmarks.json: no figure is typed in by hand."""
    import json

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Figures\n", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()]
    rows = [row for row in rows if len(row) == 3 and row[2].startswith("`manage.py ")]
    assert rows, "the README's figures table was not found"
    generated = json.loads((ROOT / "docs" / "benchmarks.json").read_text(encoding="utf-8"))
    for figure, value, command in rows:
        command = command.strip("`")
        assert command in generated, f"no section {command!r} in docs/benchmarks.json"
        written = {row["figure"]: row["value"] for row in generated[command]["figures"]}
        assert written.get(figure) == value, (command, figure, value, written.get(figure))


# ------------------------------------------------------------------------------------- wording

# Project files describe the product as it is; its history is git's. What no tracked file may say:
# a numbered working session ("session" then a number; the `--sessions N` option of a command is
# spared), work sessions told as history, helpers and agents (a person or a program that did the
# work; "helper" stays allowed only as the `onnx.helper` module, and "User-Agent" is an HTTP header),
# and "(new)". Chat sessions, Django sessions and OIDC sessions are the product's own words: a
# session without a number after it never trips this.
FORBIDDEN_WORDS = re.compile(
    r"(?<![-\w])sessions? \d+\b"
    r"|\b(?:earlier|previous|later) sessions\b"
    r"|\bsession's (?:box|start|code|first code|last code)\b"
    r"|\bsub-?agents?\b"
    r"|(?<!user-)(?<!user )\bagents?\b"
    r"|(?<!import )\bhelpers?\b(?!\.)"
    r"|(?<![\w.])\(new\)",
    re.IGNORECASE,
)


def test_the_wording_rule_catches_history_and_spares_product_words():
    caught = [
        "measured in session " + "17",
        "Sessions " + "9 and 10",
        "earlier " + "sessions measured",
        "the session's " + "box was slower",
        "a sub" + "agent wrote it",
        "the " + "agent did",
        "small text " + "helpers",
        "Helper" + " functions",
        "a page " + "(new)",
    ]
    spared = [
        "a chat session and its history",
        "one session per (file, window, batch size)",
        "the session's last question",
        "an OIDC response whose state this session did not start",
        "python -m ragchat.bench.server_setup --chunks 10000 --sessions 260",
        "GET /api/v1/sessions/SESSION_ID",
        'headers={"User-Agent": policy.user_agent}',
        "User-agent: *",
        "from onnx import helper",
        "helper.make_node('Add')",
        "status, body = health(new)",
    ]
    assert [text for text in caught if not FORBIDDEN_WORDS.search(text)] == []
    assert [text for text in spared if FORBIDDEN_WORDS.search(text)] == []


def test_no_tracked_file_tells_who_did_what():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode:
        pytest.skip("not a git checkout")
    found = []
    here = str(Path(__file__).resolve().relative_to(ROOT))  # the rule's own definition names the words
    for name in listed.stdout.splitlines():
        if name == here:
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # images and other binary files; a file deleted but not yet committed
        for number, line in enumerate(text.splitlines(), 1):
            if match := FORBIDDEN_WORDS.search(line):
                found.append(f"{name}:{number}: {match.group(0)!r} in {line.strip()[:120]}")
    assert not found, "project files speak of the product, not of who did what:\n" + "\n".join(found)
