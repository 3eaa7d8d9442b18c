"""A small OpenID Connect provider for the sign-in tests, run as a process of its own.

    python tests/access/oidc_provider.py --client-id ID --client-secret SECRET --redirect-uri URI \
        [--post-logout-redirect-uri URI]

It prints "READY <port>" and serves, over real HTTP on 127.0.0.1: discovery, JWKS, authorize (a
sign-in form: the test posts a username, as a person would), token (authorization code with PKCE,
refresh token; client_secret_post or basic), userinfo, and end_session (RP-initiated logout 1.0).
ID tokens are RS256 JWTs signed with a key made at start-up (joserfc, the JOSE library of Authlib's
author). A sign-in at the form starts the provider's own session (a cookie, and the `sid` claim of
the ID tokens it gives): while it lasts, authorize signs the browser in again without the form, as
real providers do. end_session ends it, for a valid `id_token_hint` of this client and a registered
`post_logout_redirect_uri`, and sends the browser there. The people, their groups and whether they
are disabled are set by the test through POST /control (JSON), which answers with the state,
open sessions included:

    {"users": {"alice": {"email": ..., "name": ..., "groups": [...], "disabled": false}}}
    {"forge": "wrong_signature" | "wrong_audience" | "expired" | "wrong_nonce" | "wrong_issuer"}
    {"end_session": false}   (discovery names no end_session_endpoint, as Google's does not)
    {"sessions": {}}         (every session of the provider ends)

`forge` spoils the next ID token once, as an attacker or a misconfigured provider would. A
disabled person cannot sign in, and their refresh tokens get `invalid_grant`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import secrets
import sys
import threading
import time
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import RSAKey

KID = "test-key-1"
TOKEN_SECONDS = 300
SESSION_COOKIE = "idp_session"  # the provider's own: the browser keeps it beside ragchat's


class Provider:
    def __init__(
        self, *, client_id: str, client_secret: str, redirect_uris: list[str], post_logout_uris: list[str]
    ) -> None:
        self.client_id, self.client_secret, self.redirect_uris = client_id, client_secret, redirect_uris
        self.post_logout_uris = post_logout_uris
        self.sessions: dict[str, str] = {}  # the provider's own sign-ins: sid -> username
        self.end_session = True  # discovery names end_session_endpoint
        self.key = RSAKey.generate_key(2048, parameters={"kid": KID, "use": "sig", "alg": "RS256"})
        self.rogue_key = RSAKey.generate_key(2048, parameters={"kid": KID})  # same kid, other key
        self.issuer = ""
        self.users: dict[str, dict] = {}
        self.codes: dict[str, dict] = {}
        self.access_tokens: dict[str, str] = {}
        self.refresh_tokens: dict[str, str] = {}
        self.forge: str | None = None
        self.lock = threading.Lock()

    def claims(self, username: str) -> dict:
        u = self.users[username]
        if u.get("overage"):  # as Entra ID for a person in too many groups: a pointer, no list
            return {
                "sub": u.get("sub") or f"sub-{username}",
                "preferred_username": username,
                "email": u.get("email", f"{username}@example.com"),
                "_claim_names": {"groups": "src1"},
                "_claim_sources": {"src1": {"endpoint": "https://graph.example.com/getMemberObjects"}},
            }
        return {
            "sub": u.get("sub") or f"sub-{username}",
            "preferred_username": username,
            "email": u.get("email", f"{username}@example.com"),
            "name": u.get("name", username.title()),
            "given_name": u.get("name", username.title()).split(" ")[0],
            "groups": list(u.get("groups", [])),
        }

    def id_token(self, username: str, *, nonce: str | None, sid: str | None = None) -> str:
        now = int(time.time())
        claims = {
            **self.claims(username),
            "iss": self.issuer,
            "aud": self.client_id,
            "iat": now,
            "exp": now + TOKEN_SECONDS,
            "auth_time": now,
        }
        if nonce is not None:
            claims["nonce"] = nonce
        if sid is not None:
            claims["sid"] = sid
        key = self.key
        with self.lock:
            forge, self.forge = self.forge, None
        if forge == "wrong_signature":
            key = self.rogue_key
        elif forge == "wrong_audience":
            claims["aud"] = "some-other-application"
        elif forge == "expired":
            claims["iat"], claims["exp"] = now - 3600, now - 1800
        elif forge == "wrong_nonce":
            claims["nonce"] = "not-the-nonce-of-this-sign-in"
        elif forge == "wrong_issuer":
            claims["iss"] = "https://evil.example.com"
        return jwt.encode({"alg": "RS256", "kid": KID, "typ": "JWT"}, claims, key)

    def tokens_for(self, username: str, *, nonce: str | None, sid: str | None = None) -> dict:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        with self.lock:
            self.access_tokens[access] = username
            self.refresh_tokens[refresh] = username
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": TOKEN_SECONDS,
            "refresh_token": refresh,
            "id_token": self.id_token(username, nonce=nonce, sid=sid),
        }

    def hinted(self, token: str) -> dict | None:
        """The claims of an ID token this provider gave this client (expired ones too, as RP-initiated
        logout asks), or None."""
        try:
            claims = jwt.decode(token, self.key).claims
        except (JoseError, ValueError):
            return None
        return claims if claims.get("iss") == self.issuer and claims.get("aud") == self.client_id else None


class Handler(BaseHTTPRequestHandler):
    provider: Provider

    def log_message(self, format, *args):  # quiet
        return

    def _send(self, status: int, body: bytes | str | dict, content_type: str = "application/json", headers=None):
        if isinstance(body, dict):
            body = json.dumps(body)
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _form(self) -> dict[str, str]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode()
        if (self.headers.get("Content-Type") or "").startswith("application/json"):
            return json.loads(raw or "{}")
        return {k: v[0] for k, v in parse_qs(raw).items()}

    def do_GET(self):
        p = self.provider
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/.well-known/openid-configuration":
            return self._send(
                200,
                {
                    "issuer": p.issuer,
                    "authorization_endpoint": p.issuer + "/authorize",
                    "token_endpoint": p.issuer + "/token",
                    "userinfo_endpoint": p.issuer + "/userinfo",
                    "jwks_uri": p.issuer + "/jwks",
                    "response_types_supported": ["code"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "code_challenge_methods_supported": ["S256"],
                    "grant_types_supported": ["authorization_code", "refresh_token"],
                    "scopes_supported": ["openid", "email", "profile", "groups", "offline_access"],
                    **({"end_session_endpoint": p.issuer + "/end_session"} if p.end_session else {}),
                },
            )
        if url.path == "/jwks":
            return self._send(200, {"keys": [p.key.as_dict(private=False)]})
        if url.path == "/authorize":
            problem = self._authorize_problem(query)
            if problem:
                return self._send(400, problem, "text/plain")
            sid = self._session_id()
            username = p.sessions.get(sid, "")
            if username in p.users and not p.users[username].get("disabled"):
                return self._back_with_code(query, username, sid)  # signed in here already: no form
            hidden = "".join(
                f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in query.items()
            )
            page = (
                "<!doctype html><title>Test identity provider</title><h1>Sign in to the test provider</h1>"
                f'<form method="post" action="/authorize">{hidden}'
                '<label>Username <input name="username"></label><button>Sign in</button></form>'
            )
            return self._send(200, page, "text/html; charset=utf-8")
        if url.path == "/end_session" and p.end_session:
            return self._end_session(query)
        if url.path == "/userinfo":
            token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
            username = p.access_tokens.get(token)
            if not username or p.users.get(username, {}).get("disabled"):
                return self._send(401, {"error": "invalid_token"}, headers={"WWW-Authenticate": "Bearer"})
            return self._send(200, p.claims(username))
        return self._send(404, {"error": "not_found"})

    def _authorize_problem(self, q: dict) -> str:
        p = self.provider
        if q.get("client_id") != p.client_id:
            return "unknown client_id"
        if q.get("redirect_uri") not in p.redirect_uris:
            return f"redirect_uri {q.get('redirect_uri')!r} is not registered"
        if q.get("response_type") != "code" or "openid" not in (q.get("scope") or "").split():
            return "only the code flow with the openid scope"
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return "PKCE (S256) is required"
        return ""

    def _session_id(self) -> str:
        cookie = SimpleCookie(self.headers.get("Cookie") or "")
        return cookie[SESSION_COOKIE].value if SESSION_COOKIE in cookie else ""

    def _back_with_code(self, form: dict, username: str, sid: str, headers: dict | None = None):
        p = self.provider
        code = secrets.token_urlsafe(24)
        with p.lock:
            p.codes[code] = {
                "username": username,
                "nonce": form.get("nonce"),
                "redirect_uri": form["redirect_uri"],
                "challenge": form["code_challenge"],
                "expires": time.time() + 60,
                "sid": sid,
            }
        target = form["redirect_uri"] + "?" + urlencode({"code": code, "state": form["state"]})
        return self._send(302, b"", headers={"Location": target, **(headers or {})})

    def _end_session(self, q: dict):
        """RP-initiated logout: the session of the hint's `sid` and of the browser's cookie end."""
        p = self.provider
        claims = p.hinted(q.get("id_token_hint", ""))
        if claims is None:
            return self._send(400, "id_token_hint is not an ID token of this client", "text/plain")
        if q.get("client_id", p.client_id) != p.client_id:
            return self._send(400, "client_id does not match the id_token_hint", "text/plain")
        back = q.get("post_logout_redirect_uri")
        if back is not None and back not in p.post_logout_uris:
            return self._send(400, f"post_logout_redirect_uri {back!r} is not registered", "text/plain")
        with p.lock:
            for sid in (claims.get("sid"), self._session_id()):
                p.sessions.pop(sid or "", None)
        forget = {"Set-Cookie": f"{SESSION_COOKIE}=; Path=/; Max-Age=0"}
        if back is None:
            return self._send(200, "<!doctype html><title>Signed out</title><p>You are signed out.", "text/html")
        if q.get("state"):
            back += "?" + urlencode({"state": q["state"]})
        return self._send(302, b"", headers={"Location": back, **forget})

    def _client_ok(self, form: dict) -> bool:
        p = self.provider
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Basic "):
            cid, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        else:
            cid, secret = form.get("client_id", ""), form.get("client_secret", "")
        return cid == p.client_id and secrets.compare_digest(secret, p.client_secret)

    def do_POST(self):
        p = self.provider
        url = urlparse(self.path)
        form = self._form()
        if url.path == "/control":
            with p.lock:
                for name, data in (form.get("users") or {}).items():
                    if data is None:
                        p.users.pop(name, None)
                    else:
                        p.users[name] = {**p.users.get(name, {}), **data}
                if "forge" in form:
                    p.forge = form["forge"]
                if "end_session" in form:
                    p.end_session = bool(form["end_session"])
                if form.get("sessions") == {}:
                    p.sessions.clear()
            return self._send(200, {"users": p.users, "forge": p.forge, "sessions": p.sessions})
        if url.path == "/authorize":
            problem = self._authorize_problem(form)
            if problem:
                return self._send(400, problem, "text/plain")
            username = form.get("username", "")
            user = p.users.get(username)
            if user is None or user.get("disabled"):
                target = (
                    form["redirect_uri"]
                    + "?"
                    + urlencode(
                        {
                            "error": "access_denied",
                            "error_description": "unknown or disabled user",
                            "state": form["state"],
                        }
                    )
                )
                return self._send(302, b"", headers={"Location": target})
            sid = secrets.token_urlsafe(16)
            with p.lock:
                p.sessions[sid] = username
            cookie = f"{SESSION_COOKIE}={sid}; Path=/; HttpOnly; SameSite=Lax"
            return self._back_with_code(form, username, sid, headers={"Set-Cookie": cookie})
        if url.path == "/token":
            if not self._client_ok(form):
                return self._send(401, {"error": "invalid_client"})
            grant = form.get("grant_type")
            if grant == "authorization_code":
                with p.lock:
                    entry = p.codes.pop(form.get("code", ""), None)  # one use
                if entry is None or entry["expires"] < time.time():
                    return self._send(400, {"error": "invalid_grant", "error_description": "unknown or used code"})
                if form.get("redirect_uri") != entry["redirect_uri"]:
                    return self._send(400, {"error": "invalid_grant", "error_description": "redirect_uri mismatch"})
                verifier = form.get("code_verifier", "")
                challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                if challenge != entry["challenge"]:
                    return self._send(400, {"error": "invalid_grant", "error_description": "PKCE verifier mismatch"})
                return self._send(200, p.tokens_for(entry["username"], nonce=entry["nonce"], sid=entry["sid"]))
            if grant == "refresh_token":
                with p.lock:
                    username = p.refresh_tokens.pop(form.get("refresh_token", ""), None)  # rotated
                if username is None or username not in p.users or p.users[username].get("disabled"):
                    return self._send(400, {"error": "invalid_grant", "error_description": "grant revoked"})
                return self._send(200, p.tokens_for(username, nonce=None))
            return self._send(400, {"error": "unsupported_grant_type"})
        return self._send(404, {"error": "not_found"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--redirect-uri", action="append", required=True)
    parser.add_argument("--post-logout-redirect-uri", action="append", default=[])
    args = parser.parse_args()
    provider = Provider(
        client_id=args.client_id,
        client_secret=args.client_secret,
        redirect_uris=args.redirect_uri,
        post_logout_uris=args.post_logout_redirect_uri,
    )
    Handler.provider = provider
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    provider.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"READY {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
