"""Answer ``apiextensions.k8s.io/v1`` ConversionReviews: parse the request, convert its objects, build the response.

The API server requires the converted objects in the order it sent them, each with the same metadata (labels and
annotations excepted) and ``desiredAPIVersion``; one object that cannot be converted fails the whole review,
which it reports to its client with the message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuota import strict_json
from kuota.webhook.conversion.errors import MalformedConversionReviewError, UnconvertibleObjectError
from kuota.webhook.conversion.kinds import convert

REVIEW_API_VERSION = "apiextensions.k8s.io/v1"


@dataclass(frozen=True)
class ConversionRequest:
    uid: str
    desired_api_version: str
    objects: tuple[dict[str, Any], ...]


def decode_review(body: bytes) -> Any:
    """Strict JSON (no NaN/Infinity); a body that is not JSON, or nested too deeply, is a malformed review."""
    try:
        return strict_json.loads(body)
    except RecursionError as error:
        raise MalformedConversionReviewError("request body is nested too deeply to be a ConversionReview") from error
    except (ValueError, UnicodeDecodeError) as error:
        raise MalformedConversionReviewError(f"request body is not JSON: {error}") from error


def parse_review(document: Any) -> ConversionRequest:
    """The request of a decoded ConversionReview, or MalformedConversionReviewError naming the first bad field."""
    if not isinstance(document, dict):
        raise MalformedConversionReviewError("a ConversionReview must be a JSON object")
    if document.get("apiVersion") != REVIEW_API_VERSION or document.get("kind") != "ConversionReview":
        raise MalformedConversionReviewError(
            f"expected apiVersion {REVIEW_API_VERSION} kind ConversionReview, got apiVersion "
            f"{document.get('apiVersion')!r} kind {document.get('kind')!r}; register the CRD conversion with "
            "conversionReviewVersions: [v1]"
        )
    request = document.get("request")
    if not isinstance(request, dict):
        raise MalformedConversionReviewError("ConversionReview.request must be an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedConversionReviewError("ConversionReview.request.uid must be a non-empty string")
    desired = request.get("desiredAPIVersion")
    if not isinstance(desired, str) or not desired:
        raise MalformedConversionReviewError(
            "ConversionReview.request.desiredAPIVersion must be a non-empty string", uid
        )
    objects = request.get("objects")
    if not isinstance(objects, list):
        raise MalformedConversionReviewError("ConversionReview.request.objects must be an array", uid)
    for index, obj in enumerate(objects):
        if not isinstance(obj, dict):
            raise MalformedConversionReviewError(f"ConversionReview.request.objects[{index}] must be an object", uid)
    return ConversionRequest(uid=uid, desired_api_version=desired, objects=tuple(objects))


def _object_name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    qualified = f"{namespace}/{name}" if namespace else str(name)
    return f"{obj.get('kind')} {qualified}"


def convert_all(request: ConversionRequest) -> list[dict[str, Any]]:
    """Every object in the desired version; UnconvertibleObjectError names the object and the field at fault."""
    converted = []
    for obj in request.objects:
        try:
            converted.append(convert(obj, request.desired_api_version))
        except UnconvertibleObjectError as error:
            raise UnconvertibleObjectError(
                f"cannot convert {_object_name(obj)} to {request.desired_api_version}: {error.message}"
            ) from error
    return converted


def success(uid: str, objects: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return _review({"uid": uid, "convertedObjects": list(objects), "result": {"status": "Success"}})


def failure(uid: str, message: str) -> dict[str, Any]:
    return _review({"uid": uid, "convertedObjects": [], "result": {"status": "Failure", "message": message}})


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview", "response": response}
