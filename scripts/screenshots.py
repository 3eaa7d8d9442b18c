"""The README's screenshots, taken from the app as `make run` serves it: the demo data in a scratch
data folder, the local embedding model, the Ollama-protocol test server (ragchat/fake_ollama/) as
the model, Debian's chromium through Playwright.

    .venv/bin/python scripts/screenshots.py [--out docs/img]

The model's answers are extractive: the sentences of the retrieved passages that share the most
words with the question, each with its passage's citation (what a real model is asked to do).
Questions it is told to rate low go to the tag's owner, which fills the owner's inbox.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragchat.fake_ollama.server import SOURCE_HEADER_RE, FakeOllama, _chunk_text_after  # noqa: E402

ROUTED = [
    ("emma", "emma-demo-2026", "Can I bring my dog to the workshop on Fridays?"),
    ("noah", "noah-demo-2026", "Can I work from another country for a month?"),
    ("emma", "emma-demo-2026", "Who approves a sabbatical of three months?"),
]
ASKED = ("emma", "emma-demo-2026", "How many days of paid holiday do I get, and can I carry unused days over?")
_WORD = re.compile(r"[a-z]{3,}")
_COMMON = {"and", "the", "can", "how", "for", "you", "are", "our", "who", "what", "there", "with", "from", "this"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def extractive_answer(messages: list[dict]) -> str:
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    question = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    asked = set(_WORD.findall(question.lower())) - _COMMON
    scored = []
    for match in SOURCE_HEADER_RE.finditer(system):
        body = _chunk_text_after(system, match.end())
        for sentence in re.split(r"\n+|(?<=[.!?])\s+", body):
            sentence = " ".join(sentence.split())
            overlap = len(asked & set(_WORD.findall(sentence.lower())))
            if overlap >= 3 and len(sentence) > 30:
                scored.append((overlap, match.group(1), sentence))
    if not scored:
        return "The documents you can read do not say."
    best = sorted(scored, key=lambda s: -s[0])[:2]
    return " ".join(f"{sentence.rstrip('.')} [SourceId: {source}]." for _, source, sentence in best)


def sign_in(browser, base: str, username: str, password: str):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")
    return context, page


def ask(page, question: str) -> None:
    page.fill("#question", question)
    page.keyboard.press("Enter")
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=60_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    data = Path(tempfile.mkdtemp(prefix="ragchat-screenshots-"))
    fake = FakeOllama().start()
    fake.reply_with(extractive_answer)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DJANGO_DEBUG": "true",
        "RAGCHAT_DATA_DIR": str(data),
        "OLLAMA_BASE_URL": fake.url,
        "RAGCHAT_INGEST_BACKEND": "inprocess",
        "LOG_LEVEL": "WARNING",
    }
    for name in ("DATABASE_URL", "REDIS_URL", "QDRANT_URL", "EMBEDDING_BACKEND", "EMBEDDING_MODEL"):
        env.pop(name, None)
    manage = [sys.executable, "manage.py"]
    server = None
    try:
        subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        subprocess.run([*manage, "demo_data"], cwd=ROOT, env=env, check=True, capture_output=True)
        server = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "ragchat.asgi:application"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/accounts/login/", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("daphne did not start") from None
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            fake.rating(20)  # not supported enough: each goes to the tag's owner
            for username, password, question in ROUTED:
                context, page = sign_in(browser, base, username, password)
                ask(page, question)
                try:
                    page.wait_for_selector("article.msg-assistant.is-route:has-text('sent to')", timeout=20_000)
                except Exception:
                    print(page.inner_text("main"))
                    raise
                context.close()

            fake.rating(90)
            fake.token_delay(0.01)
            username, password, question = ASKED
            context, page = sign_in(browser, base, username, password)
            ask(page, question)
            page.locator("article.status-complete .cite-marker").first.hover()
            page.locator("article.status-complete .cite-full").first.wait_for(state="visible", timeout=5000)
            page.wait_for_timeout(400)
            page.screenshot(path=str(out / "chat.png"))
            context.close()

            context, page = sign_in(browser, base, "fiona", "fiona-demo-2026")
            page.click("nav.topnav a:has-text('Inbox')")
            page.wait_for_selector(".inbox-row", timeout=10_000)
            page.wait_for_timeout(3000)  # the "new" highlight fades
            page.screenshot(path=str(out / "inbox.png"))
            context.close()
            browser.close()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)
        fake.stop()
        shutil.rmtree(data, ignore_errors=True)
    for png in (out / "chat.png", out / "inbox.png"):
        if shutil.which("pngquant"):
            subprocess.run(["pngquant", "--force", "--skip-if-larger", "--output", str(png), "256", str(png)])
        if shutil.which("optipng"):
            subprocess.run(["optipng", "-quiet", "-o2", str(png)])
        print(png, png.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
