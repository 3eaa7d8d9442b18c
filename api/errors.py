"""The API's one error shape: {"code", "message", "request_id"} (+ "details" where a list helps),
for validation, not found (absent and forbidden look alike), scope, rate limit and upstream
failures. Error classes follow docs/specs/rag-llm-service-architecture.md (InvalidQuery:
QuestionTooShort / QuestionTooLong; OllamaUnavailable; GenerationFailed ...)."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, *, details: Any = None, headers: dict | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details, self.headers = status, code, message, details, headers


def not_found(what: str = "No such object.") -> ApiError:
    return ApiError(404, "not_found", what)


def error_body(request, code: str, message: str, details: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message, "request_id": getattr(request, "request_id", "")}
    if details is not None:
        body["details"] = details
    return body


def error_response(request, status: int, code: str, message: str, *, details: Any = None, headers=None) -> JsonResponse:
    response = JsonResponse(error_body(request, code, message, details), status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response
