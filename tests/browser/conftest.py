"""Reusable browser-test fixtures: a daphne server serving the app (subprocess, its own SQLite file,
data dir and embedded Qdrant; hashing embedder; the fake Ollama server as the model) and Debian's
Chromium through Playwright.

- `daphne_server` (session; not `live_server`, which is pytest-django's): `.url`, `.env`, `.manage(*args)`, `.shell(code)`, `.create_user(...)`,
  `.create_tag(...)`, `.log_text()`. Set-up writes go through `manage.py shell -c` in a subprocess
  (same DB file; SQLite WAL allows it while the server runs). Do not index through `.shell()` while
  the server runs: the embedded Qdrant can be opened by one process only — upload through the app.
- `live_server_url` (session): the base URL.
- `chromium` (function; the browser itself is launched once per module): the Playwright browser.
  Every context it opens runs the pages under the app's CSP (`bypass_csp` is refused) and is
  watched (`Watch`): a Content-Security-Policy violation or an htmx error in any page fails the test
  at teardown (`chromium.allow(text, why=...)` for one the test brings about on purpose). `browser_page` (function): a fresh context + page.
- `wait_until(page, script)`: polls a script in the page from here (Playwright's
  `wait_for_function` compiles its predicate in the page, which the CSP's script-src refuses).
- `sign_in(page, base_url, username, password)`: log in through the login form;
  `signed_in(browser, base_url, username, password, width=, height=)`: a fresh context of that
  viewport and a page in it, signed in: (context, page).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, *, data_dir: Path, ollama_url: str, extra_env: dict[str, str] | None = None) -> None:
        self.setup_output = ""  # what seeded_server's setup printed
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "ragchat.settings",
            "DJANGO_DEBUG": "true",
            "RAGCHAT_DATA_DIR": str(data_dir),
            "DATABASE_URL": f"sqlite:///{data_dir / 'db.sqlite3'}",
            "QDRANT_PATH": str(data_dir / "qdrant"),
            "MEDIA_ROOT": str(data_dir / "media"),
            "EMBEDDING_BACKEND": "hashing",
            "EMBEDDING_MODEL": "hashing-384",
            "OLLAMA_BASE_URL": ollama_url,
            "RAG_TIMEOUT_SECONDS": "5",
            "RAG_MIN_SIMILARITY_SCORE": "0.05",  # the hashing embedder's similarities are low
            "RAGCHAT_INGEST_BACKEND": "inprocess",
            "REDIS_URL": "",
            "LOG_LEVEL": "WARNING",
            **(extra_env or {}),
        }
        self.process: subprocess.Popen | None = None
        self._log = None

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=check, capture_output=True, text=True
        )

    def shell(self, code: str) -> str:
        done = self.manage("shell", "-c", code, check=False)
        if done.returncode:
            raise RuntimeError(f"manage.py shell failed:\n{done.stderr}")
        return done.stdout

    def create_user(
        self,
        username: str,
        password: str,
        *,
        superuser: bool = False,
        tenant_id: str = "default",
        first_name: str = "",
        last_name: str = "",
        email: str = "",
    ) -> None:
        args = json.dumps(
            dict(
                username=username,
                password=password,
                tenant_id=tenant_id,
                first_name=first_name,
                last_name=last_name,
                email=email or f"{username}@example.com",
            )
        )
        make = "create_superuser" if superuser else "create_user"
        self.shell(f"import json\nfrom ragchat.models import User\nUser.objects.{make}(**json.loads({args!r}))")

    def create_tag(
        self,
        slug: str,
        name: str,
        *,
        owner: str | None = None,
        members: tuple[str, ...] = (),
        tenant_id: str = "default",
    ) -> None:
        args = json.dumps(dict(slug=slug, name=name, owner=owner, members=list(members), tenant_id=tenant_id))
        self.shell(
            "import json\nfrom ragchat.models import User\nfrom documents.services import tag_create\n"
            f"a = json.loads({args!r})\n"
            "owner = User.objects.get(username=a['owner']) if a['owner'] else None\n"
            "tag_create(tenant_id=a['tenant_id'], name=a['name'], slug=a['slug'], owner=owner,\n"
            "           members=list(User.objects.filter(username__in=a['members'])))"
        )

    def start(self) -> LiveServer:
        if self.process is not None:
            raise RuntimeError("this server is already running: a second daphne would be orphaned")
        self.manage("migrate", "-v0")
        self._log = open(self.data_dir / "daphne.log", "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "ragchat.asgi:application"],
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/accounts/login/", timeout=2)
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"daphne did not start:\n{self.log_text()}") from None
                time.sleep(0.3)

    def log_text(self) -> str:
        path = self.data_dir / "daphne.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None


def seeded_server(
    tmp_path_factory, ollama_server, *, name: str, setup: str = "", extra_env: dict[str, str] | None = None
) -> LiveServer:
    """A server of its own for one test module: migrated, seeded by `setup` (run with
    `manage.py shell` BEFORE the server opens the embedded Qdrant, so it may index), started. What
    `setup` printed is kept in `server.setup_output` (ids the tests need)."""
    server = LiveServer(data_dir=tmp_path_factory.mktemp(name), ollama_url=ollama_server.url, extra_env=extra_env)
    if setup:
        server.manage("migrate", "-v0")
        server.setup_output = server.shell(setup)
    return server.start()


# The two widths every page is looked at in: desktop and phone.
WIDTHS = [pytest.param(1280, 800, id="desktop"), pytest.param(390, 844, id="phone")]


def assert_no_sideways_scroll(page) -> None:
    """The page fits its width: nothing scrolls sideways (a phone's 390 px included)."""
    sideways = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert sideways[0] <= sideways[1] + 1, f"the page scrolls sideways: {sideways}"


# Run in every page before its own scripts (Playwright injects it through the DevTools protocol, so the
# CSP does not apply to it): what the page reports as a CSP violation or an htmx error reaches the
# console with a mark `Watch` knows. htmx says each error in an `htmx:error` event (the
# console line it writes itself carries only the event's name).
WATCH_SCRIPT = """
document.addEventListener("securitypolicyviolation", (e) => console.error(
  `ragchat-watch: CSP violation: ${e.violatedDirective} refused ${e.blockedURI || "inline"}`
  + ` at ${e.sourceFile || location.href}:${e.lineNumber} ${e.sample || ""}`));
document.addEventListener("htmx:error", (e) => {
  const info = (e.detail && e.detail.errorInfo) || {};
  // htmx puts the event's name in `error`, unless the detail brought an error of its own (the ws
  // extension's is the socket's error event).
  const name = typeof info.error === "string" ? info.error : info.socketWrapper ? "htmx:wsError" : String(info.error);
  const at = e.target && e.target.outerHTML ? e.target.outerHTML.slice(0, 160) : "";
  const content = info.content && info.content.outerHTML ? info.content.outerHTML.slice(0, 160) : "";
  console.error(`ragchat-watch: htmx error: ${name} on ${at} ${content} at ${location.href}`);
});
"""
WATCH_MARK = "ragchat-watch: "


class Watch:
    """What the pages of one browser context said: `problems`, the Content-Security-Policy violations
    and htmx errors (a test fails on them), and `console`, the other errors and warnings of their
    consoles and their uncaught script errors (told with the problems, for context)."""

    def __init__(self, context, *, script: bool, allowed: list[str]) -> None:
        self.problems: list[str] = []
        self.console: list[str] = []
        self._allowed = allowed  # the test's: what it brings about on purpose is not a problem
        context.add_init_script(WATCH_SCRIPT)
        context.on("console", lambda message: self._heard(message, script=script))
        context.on("weberror", lambda error: self.console.append(f"uncaught: {error.error}"))

    def _heard(self, message, *, script: bool) -> None:
        text = message.text
        if text.startswith(WATCH_MARK):
            self._problem(text[len(WATCH_MARK) :])
        elif "Content Security Policy" in text:
            # With script on, the page's own event said it (with more detail); without, only this.
            if not script:
                self._problem(f"CSP violation: {text} at {message.location}")
        elif message.type in ("error", "warning"):
            self.console.append(f"{message.type}: {text} at {message.location.get('url', '')}")

    def _problem(self, text: str) -> None:
        if any(allowed in text for allowed in self._allowed):
            self.console.append(f"allowed: {text}")
        else:
            self.problems.append(text)


class WatchedBrowser:
    """The Playwright browser as a test gets it: the contexts it opens are watched (`Watch`) and may
    not bypass the page's CSP; `problems()` lists the CSP violations and htmx errors of all of them."""

    def __init__(self, browser) -> None:
        self._browser = browser
        self._watches: list[tuple[object, Watch]] = []
        self._allowed: list[str] = []

    def __getattr__(self, name: str):
        return getattr(self._browser, name)

    def new_context(self, **options):
        if options.get("bypass_csp"):
            raise ValueError("browser tests look at the pages under the app's CSP: bypass_csp is not allowed")
        context = self._browser.new_context(**options)
        script = options.get("java_script_enabled", True)
        self._watches.append((context, Watch(context, script=script, allowed=self._allowed)))
        return context

    def new_page(self, **options):
        raise NotImplementedError("open a context with new_context() and a page in it (the test closes the context)")

    def allow(self, text: str, *, why: str) -> None:
        """Problems containing `text`, from now on, are what this test brings about on purpose (`why`,
        e.g. it stops the server: the page's sockets report their error) and do not fail it."""
        assert why, "say why the test brings this about"
        self._allowed.append(text)

    def problems_in(self, context) -> list[str]:
        """The CSP violations and htmx errors this context's pages reported so far (a live list)."""
        return next(watch.problems for watched, watch in self._watches if watched is context)

    def problems(self) -> list[str]:
        return [problem for _, watch in self._watches for problem in watch.problems]

    def console(self) -> list[str]:
        return [line for _, watch in self._watches for line in watch.console]


def csp_context(chromium, width: int, height: int, *, script: bool = True):
    """A browser context at this size (script on or off) under the app's CSP, and the CSP violations
    and htmx errors its pages report (`Watch`; the test fails on them at teardown anyway)."""
    context = chromium.new_context(viewport={"width": width, "height": height}, java_script_enabled=script)
    return context, chromium.problems_in(context)


def csp_signed_in(chromium, width: int, height: int, base_url: str, username: str, password: str, *, script=True):
    """`csp_context` with a page in it, signed in as `username`: (context, page, violations)."""
    context, violations = csp_context(chromium, width, height, script=script)
    page = context.new_page()
    sign_in(page, base_url, username, password)
    return context, page, violations


def wait_until(page, script: str, *, timeout: float = 10, message: str = "") -> None:
    """Wait until `script` (an expression or a function of no argument) is true in the page, polled
    from here: Playwright's `wait_for_function` compiles its predicate in the page, which the CSP's
    script-src refuses; `page.evaluate` goes through the DevTools protocol, which it does not."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(script):
        assert time.monotonic() < deadline, message or f"not true after {timeout} s: {script}"
        page.wait_for_timeout(100)


def wait_for_answer(page, *, timeout: float = 30) -> None:
    """The newest answer complete and settled. An answer the core routes is sent again once routing
    has named who it went to (`data-routed`), which replaces its element: a card opened or a link
    found before that is gone."""
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=timeout * 1000)
    wait_until(
        page,
        "(() => { const a = [...document.querySelectorAll('article.msg-assistant.status-complete')].pop();"
        " return !a.classList.contains('is-route') || a.hasAttribute('data-routed'); })()",
        timeout=timeout,
        message="a routed answer was not sent again with who it went to",
    )


@pytest.fixture(scope="session")
def daphne_server(tmp_path_factory, ollama_server):
    server = LiveServer(data_dir=tmp_path_factory.mktemp("live-server"), ollama_url=ollama_server.url).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def live_server_url(daphne_server) -> str:
    return daphne_server.url


# Module scope, not session: Playwright's sync API runs an event loop in the main thread while it
# is open, and every later async test or async_to_sync call in the same pytest run would fail.
@pytest.fixture(scope="module")
def chromium_browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def chromium(chromium_browser):
    """The browser, its contexts watched for this test: a CSP violation or an htmx error that any of
    its pages reported fails the test here, at teardown."""
    watched = WatchedBrowser(chromium_browser)
    yield watched
    problems = watched.problems()
    if problems:
        console = watched.console()
        pytest.fail(
            f"{len(problems)} CSP violation(s) or htmx error(s) in the browser:\n"
            + "\n".join(problems[:20])
            + ("\nand its console's other errors and warnings:\n" + "\n".join(console[:20]) if console else ""),
            pytrace=False,
        )


@pytest.fixture
def browser_page(chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def sign_in(page, base_url: str, username: str, password: str) -> None:
    page.goto(base_url + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(base_url + "/")


def new_page(browser, *, width: int = 1280, height: int = 900, mobile: bool = False, **options):
    """A fresh context of a `width` x `height` viewport (a phone's touch and mobile viewport with
    `mobile`; other context `options` as given) and a page in it: (context, page)."""
    context = browser.new_context(
        viewport={"width": width, "height": height}, is_mobile=mobile, has_touch=mobile, **options
    )
    return context, context.new_page()


def signed_in(browser, base_url: str, username: str, password: str, *, width: int = 1280, height: int = 900, **options):
    """`new_page`'s page signed in as `username`: (context, page)."""
    context, page = new_page(browser, width=width, height=height, **options)
    sign_in(page, base_url, username, password)
    return context, page
