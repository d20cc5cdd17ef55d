"""Anthropic-shaped errors: ``{"type": "error", "error": {"type": ..., "message": ...}}``."""

from __future__ import annotations

from typing import Any

# HTTP status -> the error type Anthropic reports with it.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class ApiError(Exception):
    """A refusal the simulator reports to the client instead of answering."""

    def __init__(
        self,
        status: int,
        message: str,
        error_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type or ERROR_TYPES.get(status, "api_error")
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return error_body(self.error_type, self.message)


def invalid(message: str) -> ApiError:
    return ApiError(400, message)


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}
