"""Company sign-in with OpenID Connect (Entra ID, Okta, Google, Keycloak, …), on mozilla-django-oidc.

The library runs the authorization-code flow (state, nonce, PKCE) and the token exchange; this
module adds what ragchat needs around it:

- the provider's endpoints come from its discovery document (`RAGCHAT_OIDC_ISSUER`), fetched when a
  company sign-in starts, never at start-up or on a password sign-in;
- the ID token is checked in full: signature (the provider's JWKS), algorithm, issuer, audience,
  expiry and nonce (the library leaves the audience unchecked);
- a person is found by the provider's subject (`OIDCIdentity`), else linked once by e-mail to an
  existing account, else created in `RAGCHAT_OIDC_TENANT`;
- their groups are synced to tags at every sign-in (`access.group_sync`) and the refresh token is
  kept, encrypted, for `manage.py sync_groups`;
- a refused sign-in says why, on the sign-in page, and is written to the audit log;
- signing out also ends the provider's own sign-in where its discovery document names an
  `end_session_endpoint` (RP-initiated logout: `end_session_url`); where it names none (Google),
  signing out is ragchat's alone.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import jwt
import requests
from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import absolutify, import_from_settings

logger = logging.getLogger(__name__)

DISCOVERY_TTL_SECONDS = 3600
CLOCK_LEEWAY_SECONDS = 60
ID_TOKEN_SESSION_KEY = "oidc_id_token"  # the key mozilla-django-oidc's OIDC_STORE_ID_TOKEN uses


class SignInRefused(Exception):
    """A company sign-in that cannot complete; the message is for the person signing in."""


class ProviderUnavailable(SignInRefused):
    """The identity provider could not be reached or answered with something unusable."""


# ----------------------------------------------------------------------------------- settings


def enabled() -> bool:
    return bool(getattr(settings, "RAGCHAT_OIDC_ISSUER", "") and getattr(settings, "OIDC_RP_CLIENT_ID", ""))


def label() -> str:
    return getattr(settings, "RAGCHAT_OIDC_LABEL", "") or "your company account"


def local_passwords() -> str:
    """ "true" (everyone may use a password), "admins" (superusers only) or "false" (nobody)."""
    value = str(getattr(settings, "RAGCHAT_LOCAL_PASSWORDS", "true")).strip().lower()
    if value in ("false", "off", "no", "0"):
        return "false"
    return "admins" if value in ("admins", "admin") else "true"


def issuer() -> str:
    return settings.RAGCHAT_OIDC_ISSUER.rstrip("/")


_discovery: dict[str, tuple[float, dict]] = {}
_discovery_lock = threading.Lock()


def discovery() -> dict:
    """The provider's discovery document (cached for an hour), checked to name the configured issuer."""
    url = issuer() + "/.well-known/openid-configuration"
    with _discovery_lock:
        cached = _discovery.get(url)
        if cached and time.monotonic() - cached[0] < DISCOVERY_TTL_SECONDS:
            return cached[1]
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as e:
        logger.warning("OIDC discovery at %s failed: %s", url, e)
        raise ProviderUnavailable(f"{label()} cannot be reached right now. Try again in a moment.") from e
    if str(document.get("issuer", "")).rstrip("/") != issuer():
        raise ProviderUnavailable(
            f"{label()} is misconfigured: its discovery document names issuer {document.get('issuer')!r}, "
            f"not {issuer()!r}. An administrator must fix RAGCHAT_OIDC_ISSUER."
        )
    missing = [k for k in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not document.get(k)]
    if missing:
        raise ProviderUnavailable(f"{label()}'s discovery document lacks {', '.join(missing)}.")
    with _discovery_lock:
        _discovery[url] = (time.monotonic(), document)
    return document


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def end_session_url(request, id_token: str) -> str | None:
    """Where signing out sends the browser so that the provider's sign-in ends too (OpenID Connect
    RP-initiated logout 1.0): the discovery document's `end_session_endpoint`, with the ID token of
    this sign-in as `id_token_hint` and the sign-in page as `post_logout_redirect_uri` (register it
    at the provider). None, and signing out is ragchat's alone, for a session that did not sign in
    with the provider (no ID token), or a provider that names no such endpoint (Google), or one on
    another origin than the issuer (the Content-Security-Policy's form-action lets the sign-out
    form lead to the issuer's origin only: ragchat.settings). ProviderUnavailable when discovery
    fails."""
    if not id_token or not enabled():
        return None
    endpoint = str(discovery().get("end_session_endpoint") or "")
    if not endpoint:
        return None
    if origin(endpoint) != origin(issuer()):
        logger.warning("end_session_endpoint %s is not on the issuer's origin: signing out stays local", endpoint)
        return None
    query = urlencode(
        {
            "id_token_hint": id_token,
            "post_logout_redirect_uri": absolutify(request, reverse("login")),
            "client_id": settings.OIDC_RP_CLIENT_ID,
        }
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


def forget_discovery() -> None:
    with _discovery_lock:
        _discovery.clear()


_ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


def setting(attr: str, *args):
    """mozilla-django-oidc's settings, the provider's endpoints taken from discovery."""
    if attr in _ENDPOINTS:
        return discovery().get(_ENDPOINTS[attr]) or (args[0] if args else None)
    return import_from_settings(attr, *args)


# ----------------------------------------------------------------------------------- refresh tokens


def _fernet() -> Fernet:
    key = hashlib.sha256(("ragchat-oidc-refresh-token:" + settings.SECRET_KEY).encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal(token: str) -> str:
    return _fernet().encrypt(token.encode()).decode() if token else ""


def unseal(sealed: str) -> str:
    if not sealed:
        return ""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:
        return ""  # SECRET_KEY changed: the token is unusable, the next sign-in stores a new one


# ----------------------------------------------------------------------------------- tokens


def verify_id_token(token: str, *, nonce: str | None, key) -> dict:
    """Check an ID token: signature, algorithm, issuer, audience, expiry, and nonce when one was sent."""
    if not token:
        raise SignInRefused(f"{label()} sent no ID token.")
    algorithm = settings.OIDC_RP_SIGN_ALGO
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as e:
        raise SignInRefused(f"The ID token from {label()} is not a valid token.") from e
    if header.get("alg") != algorithm:
        raise SignInRefused(f"The ID token from {label()} is signed with {header.get('alg')!r}, not {algorithm}.")
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[algorithm],
            audience=settings.OIDC_RP_CLIENT_ID,
            issuer=discovery()["issuer"],
            leeway=CLOCK_LEEWAY_SECONDS,
            options={"require": ["exp", "iat", "iss", "aud", "sub"]},
        )
    except jwt.ExpiredSignatureError as e:
        raise SignInRefused(f"The sign-in from {label()} has expired. Please sign in again.") from e
    except jwt.InvalidAudienceError as e:
        raise SignInRefused(f"The ID token from {label()} was issued for another application.") from e
    except jwt.InvalidIssuerError as e:
        raise SignInRefused(f"The ID token was not issued by {label()}.") from e
    except jwt.InvalidSignatureError as e:
        raise SignInRefused(f"The ID token's signature does not match {label()}'s keys.") from e
    except jwt.PyJWTError as e:
        raise SignInRefused(f"The ID token from {label()} was refused: {e}.") from e
    if nonce is not None and claims.get("nonce") != nonce:
        raise SignInRefused(
            "The sign-in response does not belong to this sign-in (nonce mismatch). Please start again."
        )
    return claims


class GroupsUnknown(SignInRefused):
    """The provider did not list the groups (Entra's "overage": too many groups for a token)."""


def groups_from(claims: dict) -> list[str]:
    """The groups claim as a sorted list of strings. Absent means none (providers leave it out for
    a person in no group); a claim the provider points elsewhere for (Entra ID's `_claim_names`
    overage, over 200 groups) raises GroupsUnknown: nothing is removed on a list we did not get."""
    name = settings.RAGCHAT_OIDC_GROUPS_CLAIM
    if name not in claims and name in (claims.get("_claim_names") or {}):
        raise GroupsUnknown(
            f"{label()} sent no group list (too many groups for a token): assign only the groups that matter "
            "to the application at the provider"
        )
    raw = claims.get(name)
    if raw is None:
        return []
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list | tuple):
        return []
    return sorted({str(g) for g in raw if str(g).strip()})


class OIDCBackend(OIDCAuthenticationBackend):
    """The authentication backend of a company sign-in (the callback's `authenticate`)."""

    def __init__(self, *args, **kwargs):
        # The library reads the endpoints here; ours come from discovery, asked for only when a
        # company sign-in actually runs (every password sign-in builds this backend too).
        self.UserModel = get_user_model()

    get_settings = staticmethod(setting)

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self):  # noqa: N802 (the library's names)
        return setting("OIDC_OP_TOKEN_ENDPOINT")

    @property
    def OIDC_OP_USER_ENDPOINT(self):  # noqa: N802
        return setting("OIDC_OP_USER_ENDPOINT", None)

    @property
    def OIDC_OP_JWKS_ENDPOINT(self):  # noqa: N802
        return setting("OIDC_OP_JWKS_ENDPOINT")

    OIDC_RP_IDP_SIGN_KEY = None

    @property
    def OIDC_RP_CLIENT_ID(self):  # noqa: N802
        return settings.OIDC_RP_CLIENT_ID

    @property
    def OIDC_RP_CLIENT_SECRET(self):  # noqa: N802
        return settings.OIDC_RP_CLIENT_SECRET

    @property
    def OIDC_RP_SIGN_ALGO(self):  # noqa: N802
        return settings.OIDC_RP_SIGN_ALGO

    def verify_token(self, token, **kwargs):
        try:
            key = self.retrieve_matching_jwk(token)
        except SuspiciousOperation as e:
            raise SignInRefused(f"The ID token's signing key is not one of {label()}'s keys.") from e
        except (requests.RequestException, jwt.PyJWTError, KeyError, ValueError) as e:
            raise ProviderUnavailable(f"{label()}'s signing keys could not be read.") from e
        return verify_id_token(token, nonce=kwargs.get("nonce"), key=key)

    def authenticate(self, request, **kwargs):
        if request is None or not enabled():
            return None
        nonce = kwargs.pop("nonce", None)
        code_verifier = kwargs.pop("code_verifier", None)
        code, state = request.GET.get("code"), request.GET.get("state")
        if not code or not state:
            return None
        self.request = request
        self._id_token = ""
        try:
            return self._sign_in(request, code=code, nonce=nonce, code_verifier=code_verifier)
        except SignInRefused as e:
            request.oidc_failure = str(e)
            request.oidc_unverified_claims = _unverified_claims(self._id_token)
        except requests.HTTPError as e:
            body = getattr(e.response, "text", "")[:200]
            logger.warning("OIDC token exchange refused: %s", body)
            request.oidc_failure = f"{label()} refused the sign-in ({getattr(e.response, 'status_code', '?')})."
        except requests.RequestException as e:
            logger.warning("OIDC provider unreachable: %s", e)
            request.oidc_failure = f"{label()} cannot be reached right now. Try again in a moment."
        return None

    def _sign_in(self, request, *, code: str, nonce, code_verifier):
        payload = {
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "client_secret": settings.OIDC_RP_CLIENT_SECRET,
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": absolutify(request, reverse(settings.OIDC_AUTHENTICATION_CALLBACK_URL)),
        }
        if code_verifier is not None:
            payload["code_verifier"] = code_verifier
        token_info = self.get_token(payload)
        self._id_token = str(token_info.get("id_token") or "")
        id_claims = self.verify_token(token_info.get("id_token"), nonce=nonce)
        claims = dict(id_claims)
        if self.OIDC_OP_USER_ENDPOINT and token_info.get("access_token"):
            userinfo = self.get_userinfo(token_info["access_token"], token_info.get("id_token"), id_claims)
            if userinfo.get("sub") != id_claims["sub"]:
                raise SignInRefused(f"{label()}'s user information names another person than the ID token.")
            claims.update(userinfo)
        request.oidc_claims = claims
        user = person_for(claims)
        if not user.is_active:
            raise SignInRefused("This account is disabled in ragchat. Ask an administrator.")
        from access import group_sync

        try:
            groups: list[str] | None = groups_from(claims)
        except GroupsUnknown as e:
            logger.warning("group sync skipped at sign-in of %s: %s", user.get_username(), e)
            groups = None  # signed in; their synced tags stay as they were
        request.oidc_id_token = self._id_token  # kept in the session by the callback: signing out hints with it
        with transaction.atomic():
            identity = user.oidc_identity
            identity.signed_in_at = timezone.now()
            if token_info.get("refresh_token"):
                identity.refresh_token = seal(token_info["refresh_token"])
            identity.sync_error = "" if groups is not None else "no group list at the last sign-in (overage)"
            identity.save(update_fields=["signed_in_at", "refresh_token", "sync_error"])
            if groups is not None:
                group_sync.sync_user(user, groups, source="sign-in", request=request)
        return user


def _unverified_claims(token: str) -> dict:
    """What a refused ID token claims, for the audit log only (marked unverified there)."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return {}
    return claims if isinstance(claims, dict) else {}


def _claim(claims: dict, name: str) -> str:
    value = claims.get(name)
    return str(value).strip() if value is not None else ""


def _free_username(wanted: str) -> str:
    User = get_user_model()
    base = wanted[:140] or "user"
    name, n = base, 1
    while User.objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def person_for(claims: dict):
    """The account of these claims: by the provider's subject; else the one local account with the
    same e-mail (linked once, its tags kept); else a new account in RAGCHAT_OIDC_TENANT. Name and
    e-mail follow the provider at every sign-in."""
    from access.models import OIDCIdentity

    User = get_user_model()
    sub = _claim(claims, "sub")
    if not sub:
        raise SignInRefused(f"{label()} did not say who you are (no subject).")
    email = _claim(claims, settings.RAGCHAT_OIDC_EMAIL_CLAIM)
    username = _claim(claims, settings.RAGCHAT_OIDC_USERNAME_CLAIM) or email or sub
    names = {
        "first_name": _claim(claims, "given_name")[:150],
        "last_name": _claim(claims, "family_name")[:150],
    }
    if not names["first_name"] and not names["last_name"] and _claim(claims, "name"):
        names["first_name"] = _claim(claims, "name")[:150]
    with transaction.atomic():
        identity = OIDCIdentity.objects.select_related("user").filter(issuer=issuer(), subject=sub).first()
        if identity is not None:
            user = identity.user
        else:
            same_email = list(User.objects.filter(email__iexact=email, oidc_identity__isnull=True)[:2]) if email else []
            if len(same_email) == 1:
                user = same_email[0]
            else:
                user = User(username=_free_username(username), tenant_id=settings.RAGCHAT_OIDC_TENANT)
                user.set_unusable_password()
                user.email = email
                user.save()
            OIDCIdentity.objects.create(user=user, issuer=issuer(), subject=sub)
        changed = [f for f, v in {**names, "email": email}.items() if v and getattr(user, f) != v]
        for f in changed:
            setattr(user, f, {**names, "email": email}[f])
        if changed:
            user.save(update_fields=changed)
    return user


# ----------------------------------------------------------------------------------- passwords


class AdminPasswordBackend(ModelBackend):
    """RAGCHAT_LOCAL_PASSWORDS=admins: passwords sign in superusers only (the way back in)."""

    def user_can_authenticate(self, user) -> bool:
        return bool(super().user_can_authenticate(user) and getattr(user, "is_superuser", False))


def password_sign_in_allowed() -> bool:
    return local_passwords() != "false"


def describe_failure(request, credentials: dict[str, Any]) -> tuple[str, str, Any] | None:
    """(username, reason, account or None) of a failed company sign-in, for the audit log; None for
    a password one."""
    from access.models import OIDCIdentity

    if "nonce" not in credentials and not hasattr(request, "oidc_failure"):
        return None
    claims = getattr(request, "oidc_claims", {}) or {}
    verified = bool(claims)
    if not verified:
        claims = getattr(request, "oidc_unverified_claims", {}) or {}
    who = _claim(claims, settings.RAGCHAT_OIDC_USERNAME_CLAIM) or _claim(claims, "email") or _claim(claims, "sub")
    if who and not verified:
        who += " (claimed by a refused token)"
    identity = (
        OIDCIdentity.objects.select_related("user").filter(issuer=issuer(), subject=_claim(claims, "sub")).first()
        if verified and claims.get("sub")
        else None
    )
    reason = getattr(request, "oidc_failure", "") or "the company sign-in did not complete"
    return who[:150], reason, identity.user if identity else None


def record_failure(request, reason: str) -> None:
    """A company sign-in that failed outside `authenticate` (provider error, stale response)."""
    from access.audit import audit_record
    from access.models import AuditEvent

    audit_record(
        action=AuditEvent.Action.SIGN_IN_FAILED,
        tenant_id=settings.RAGCHAT_OIDC_TENANT,
        summary=f"failed sign-in with {label()}: {reason}",
        data={"method": "oidc", "reason": reason},
        request=request,
    )


def axes_exempt(request, credentials: dict | None) -> bool:
    """django-axes leaves company sign-ins alone (AXES_WHITELIST_CALLABLE): the provider checks the
    password and throttles guessing; a refused token is no secret being guessed, and counting it by
    address with no username would lock a whole office behind one address out. Still audited."""
    return "nonce" in (credentials or {}) or str(getattr(request, "path", "")).startswith("/oidc/")
