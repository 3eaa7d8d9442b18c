"""The API against its own OpenAPI schema, over real HTTP (daphne, its own SQLite file): schemathesis
generates requests from /api/v1/openapi.json (valid ones and invalid ones, every check on) and
sends them with a full token, a read-only token and no token. No answer may be a server error or
differ from what the schema says: the schema and the server cannot drift apart.

A fixed seed (SEED) and enough examples that numbers far beyond the database's integers are sent
(`test_huge_numbers_were_sent` proves they were); the run's calls and duration are written to
test-artifacts/api-schemathesis.json.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, seed, settings
from schemathesis.config import SchemathesisConfig

from api.endpoints import api
from ragchat.bounds import COUNT_MAX
from tests.browser.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
SEED = 39
MAX_EXAMPLES = 25

SETUP = r"""
import json
from django.core.management import call_command
call_command("migrate", verbosity=0)
from ragchat.models import User
from documents.services import tag_create, tag_ensure_public
from api.services import token_create
ann = User.objects.create_user("ann", password="pw-ann-12345", first_name="Ann")
bob = User.objects.create_user("bob", password="pw-bob-12345", first_name="Bob")
tag_ensure_public(tenant_id="default")
tag_create(tenant_id="default", name="Alpha", slug="alpha", owner=ann, members=[bob])
tag_create(tenant_id="default", name="Beta", slug="beta", owner=bob)
tokens = {
    "full": token_create(user=ann, name="full", scopes=["read", "chat", "upload", "answer"], expires_in_days=1).secret,
    "read": token_create(user=ann, name="read", scopes=["read"], expires_in_days=1).secret,
}
print(json.dumps(tokens))
"""

# Schema-valid requests the server refuses by what it reads in them, as documented: a file is
# checked by its content (type, size, duplicate: 422 upload_refused), and a routed question by its
# state (422 not_answerable).
CONTENT_CHECKED = ["2xx", "401", "403", "404", "409", "422", "429"]

CONFIG = {
    "seed": SEED,
    # Unknown query parameters are ignored (no schema forbids them): not sent as invalid data.
    "generation": {
        "mode": "all",
        "max-examples": MAX_EXAMPLES,
        "deterministic": True,
        "database": "none",
        "allow-extra-parameters": False,
    },
    "operations": [
        {
            "include-path": "/api/v1/documents",
            "include-method": "POST",
            "checks": {"positive_data_acceptance": {"expected-statuses": CONTENT_CHECKED}},
        },
        {
            "include-path-regex": "/answer$",
            "checks": {"positive_data_acceptance": {"expected-statuses": CONTENT_CHECKED}},
        },
    ],
}

CALLS: Counter = Counter()
HUGE: Counter = Counter()
STATUSES: dict[str, Counter] = {"full": Counter(), "read": Counter(), "none": Counter()}
STARTED: list[float] = []


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    server = LiveServer(
        data_dir=tmp_path_factory.mktemp("api-schemathesis"),
        ollama_url=ollama_server.url,
        extra_env={"RAGCHAT_API_CHAT_RATE": "100000/m", "RAGCHAT_API_RATE": "100000/m"},
    )
    STARTED.append(time.monotonic())
    TOKENS.update(json.loads(server.shell(SETUP).strip().splitlines()[-1]))
    server.start()
    yield server
    server.stop()


# The schema as the application builds it (the one /api/v1/openapi.json serves:
# test_the_served_schema_is_the_one_tested); the requests go to the live server.
schema = schemathesis.openapi.from_dict(api.get_openapi_schema(), config=SchemathesisConfig.from_dict(CONFIG))


def test_the_served_schema_is_the_one_tested(server):
    assert httpx.get(f"{server.url}/api/v1/openapi.json").json() == json.loads(json.dumps(schema.raw_schema))


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b"--xx--\r\n", "multipart/form-data; boundary=xx"),  # a multipart body with no part
        (b"", "multipart/form-data; boundary=xx"),
        (b"files=1", "multipart/form-data"),  # no boundary
    ],
)
def test_authentication_is_decided_before_the_body_is_read(server, body, content_type):
    """Without a token: 401 in the API's shape, whatever the body (daphne's HTTP layer no longer
    parses a body itself and answers a bare 400); with one, an unreadable body is a 400 sentence."""
    headers = {"Content-Type": content_type}
    anonymous = httpx.post(f"{server.url}/api/v1/documents", content=body, headers=headers)
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthorized", anonymous.text
    signed = httpx.post(
        f"{server.url}/api/v1/documents",
        content=body,
        headers={**headers, "Authorization": f"Bearer {TOKENS['full']}"},
    )
    assert signed.status_code in (400, 422), signed.text
    assert signed.json()["message"], signed.text


def _huge(case) -> bool:
    """A number beyond PostgreSQL's integer (as a number or as digits) anywhere in the request."""
    values = [*(case.query or {}).values(), *(case.path_parameters or {}).values()]
    if isinstance(case.body, dict):
        values += list(case.body.values())
    flat = [str(v) for value in values for v in (value if isinstance(value, list) else [value])]
    return any(v.isascii() and v.isdigit() and int(v) > COUNT_MAX for v in flat)


TOKENS: dict[str, str] = {}


class _Token:
    """The token schemathesis sends (it knows the request's auth: a negative case that drops
    the header is still sent with it, and checks such as ignored_auth try without it)."""

    who = ""

    def get(self, case, ctx):
        return TOKENS.get(self.who, "")  # asked at collection too, before the server has made it

    def set(self, case, data, ctx):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


class FullToken(_Token):
    who = "full"


class ReadToken(_Token):
    who = "read"


def _run(case, server, who: str) -> None:
    CALLS[who] += 1
    if _huge(case):
        HUGE[f"{case.method} {case.path}"] += 1
    response = case.call_and_validate(base_url=server.url, timeout=30)
    STATUSES[who][f"{response.status_code // 100}xx"] += 1


def generated(test):
    return seed(SEED)(
        settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
        )(test)
    )


@schema.parametrize()
@schema.auth.apply(FullToken, refresh_interval=None)
@generated
def test_full_token(case, server):
    _run(case, server, "full")


@schema.parametrize()
@schema.auth.apply(ReadToken, refresh_interval=None)
@generated
def test_read_only_token(case, server):
    _run(case, server, "read")


@schema.parametrize()
@generated
def test_no_token(case, server):
    _run(case, server, "none")


def test_every_operation_is_a_test_of_its_own(request):
    """pytest-xdist schedules by node id: operations sharing one would not all run (tests/conftest.py)."""
    ids = [item.nodeid for item in request.session.items if getattr(item, "operation_label", None)]
    assert len(ids) == len(set(ids)), sorted(ids)


def test_huge_numbers_were_sent(server):
    """The run above reached the numbers of issue 39 (beyond PostgreSQL's integer, beyond bigint)."""
    duration = time.monotonic() - STARTED[0]
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "api-schemathesis.json").write_text(
        json.dumps(
            {
                "schemathesis": schemathesis.__version__,
                "seed": SEED,
                "max_examples": MAX_EXAMPLES,
                "calls": dict(CALLS),
                "huge_number_calls": dict(HUGE),
                "status_classes": {who: dict(c) for who, c in STATUSES.items()},
                "seconds_with_server_start": round(duration, 1),
            },
            indent=2,
        )
    )
    # Each token did what it may: the full one was answered 2xx, the read-only one too (reading),
    # no token only on the public health check.
    assert STATUSES["full"]["2xx"] and STATUSES["read"]["2xx"] and STATUSES["none"]["4xx"], STATUSES
    assert {"GET /api/v1/documents", "POST /api/v1/questions/{question_id}/answer"} <= set(HUGE), HUGE


ISSUE_39 = 1444315045905042505728


@pytest.mark.parametrize("who", ["full", "read", None])
def test_the_requests_of_issue_39_keep_the_schema(server, who):
    """The two requests that were server errors, checked by schemathesis like the generated ones."""
    headers = {"Authorization": f"Bearer {TOKENS[who]}"} if who else {}
    page = schema["/api/v1/documents"]["GET"].Case(query={"page": ISSUE_39, "page_size": 24}, headers=headers)
    assert page.call_and_validate(base_url=server.url, timeout=30).status_code == (422 if who else 401)
    upload = schema["/api/v1/documents"]["POST"].Case(
        body={"files": [b"Notes on the quarterly plan."], "tags": [str(ISSUE_39)]},
        media_type="multipart/form-data",
        headers=headers,
    )
    assert upload.call_and_validate(base_url=server.url, timeout=30).status_code == {"full": 403, "read": 403}.get(
        who, 401
    )
