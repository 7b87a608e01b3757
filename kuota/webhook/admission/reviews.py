"""Parse ``admission.k8s.io/v1`` AdmissionReviews into typed requests and build their responses.

Every check here is about the review's envelope; what the object must look like is each rule's business.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from kuota import strict_json
from kuota.webhook.admission.errors import MalformedReviewError
from kuota.webhook.admission.json_patch import PatchOperation, encode
from kuota.webhook.jobs.adapter import GroupVersionKind

REVIEW_API_VERSION = "admission.k8s.io/v1"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


@dataclass(frozen=True)
class UserInfo:
    username: str
    groups: frozenset[str]


@dataclass(frozen=True)
class AdmissionRequest:
    uid: str
    kind: GroupVersionKind
    operation: Operation
    namespace: str
    name: str
    user: UserInfo
    object: Mapping[str, Any] | None
    old_object: Mapping[str, Any] | None
    dry_run: bool


@dataclass(frozen=True)
class Verdict:
    """What a rule decided. A denial carries a message a person can act on."""

    allowed: bool
    message: str = ""
    code: int = 200
    patch: tuple[PatchOperation, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    @classmethod
    def allow(cls, patch: Sequence[PatchOperation] = (), warnings: Sequence[str] = ()) -> Verdict:
        return cls(allowed=True, patch=tuple(patch), warnings=tuple(warnings))

    @classmethod
    def deny(cls, message: str, code: int = 403) -> Verdict:
        return cls(allowed=False, message=message, code=code)


class _Status(TypedDict, total=False):
    code: int
    message: str
    reason: str


class AdmissionResponse(TypedDict, total=False):
    uid: str
    allowed: bool
    status: _Status
    patchType: str
    patch: str
    warnings: list[str]


class AdmissionReviewResponse(TypedDict):
    apiVersion: str
    kind: str
    response: AdmissionResponse


_REASONS = {400: "BadRequest", 403: "Forbidden", 422: "Invalid", 500: "InternalError"}


def response(uid: str, verdict: Verdict) -> AdmissionReviewResponse:
    body: AdmissionResponse = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        body["status"] = {
            "code": verdict.code,
            "message": verdict.message,
            "reason": _REASONS.get(verdict.code, "Forbidden"),
        }
    if verdict.patch:
        body["patchType"] = "JSONPatch"
        body["patch"] = encode(verdict.patch)
    if verdict.warnings:
        body["warnings"] = list(verdict.warnings)
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": body}


def decode_json(body: bytes) -> Any:
    """Strict JSON: no NaN/Infinity, and nesting or numbers too large to parse become MalformedReviewError."""
    try:
        return strict_json.loads(body)
    except RecursionError as error:
        raise MalformedReviewError("request body is nested too deeply to be an AdmissionReview") from error
    except (ValueError, UnicodeDecodeError) as error:
        raise MalformedReviewError(f"request body is not JSON: {error}") from error


def _string(container: Mapping[str, Any], key: str, where: str, uid: str | None, required: bool = True) -> str:
    value = container.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise MalformedReviewError(f"{where}.{key} must be a string, got {_kind_of(value)}", uid)
    return value


def _kind_of(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def _object_or_none(container: Mapping[str, Any], key: str, uid: str) -> Mapping[str, Any] | None:
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedReviewError(f"request.{key} must be an object, got {_kind_of(value)}", uid)
    return value


def parse_review(document: Any) -> AdmissionRequest:
    """The typed request of a decoded AdmissionReview, or MalformedReviewError naming the first bad field."""
    if not isinstance(document, dict):
        raise MalformedReviewError(f"an AdmissionReview must be a JSON object, got {_kind_of(document)}")
    if document.get("apiVersion") != REVIEW_API_VERSION or document.get("kind") != "AdmissionReview":
        raise MalformedReviewError(
            f"expected apiVersion {REVIEW_API_VERSION} kind AdmissionReview, got apiVersion "
            f"{document.get('apiVersion')!r} kind {document.get('kind')!r}; register the webhook with "
            "admissionReviewVersions: [v1]"
        )
    request = document.get("request")
    if not isinstance(request, dict):
        raise MalformedReviewError(f"AdmissionReview.request must be an object, got {_kind_of(request)}")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReviewError("AdmissionReview.request.uid must be a non-empty string")
    kind = request.get("kind")
    if not isinstance(kind, dict):
        raise MalformedReviewError(f"request.kind must be an object, got {_kind_of(kind)}", uid)
    gvk = GroupVersionKind(
        group=_string(kind, "group", "request.kind", uid, required=False),
        version=_string(kind, "version", "request.kind", uid),
        kind=_string(kind, "kind", "request.kind", uid),
    )
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise MalformedReviewError(f"request.operation must be one of {', '.join(OPERATIONS)}, got {operation!r}", uid)
    user = request.get("userInfo", {})
    if not isinstance(user, dict):
        raise MalformedReviewError(f"request.userInfo must be an object, got {_kind_of(user)}", uid)
    groups = user.get("groups", [])
    if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
        raise MalformedReviewError("request.userInfo.groups must be an array of strings", uid)
    dry_run = request.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise MalformedReviewError(f"request.dryRun must be a boolean, got {_kind_of(dry_run)}", uid)
    return AdmissionRequest(
        uid=uid,
        kind=gvk,
        operation=operation,
        namespace=_string(request, "namespace", "request", uid, required=False),
        name=_string(request, "name", "request", uid, required=False),
        user=UserInfo(
            username=_string(user, "username", "request.userInfo", uid, required=False), groups=frozenset(groups)
        ),
        object=_object_or_none(request, "object", uid),
        old_object=_object_or_none(request, "oldObject", uid),
        dry_run=dry_run,
    )
