"""One exception tree: every exception class kuota defines derives from :class:`kuota.errors.KuotaError`, and
the Kubernetes client's errors are typed by cause."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import kuota
from kuota.errors import ConfigurationError, KuotaError
from kuota.kube.client import ApiResponse
from kuota.kube.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    GoneError,
    KubeconfigError,
    MalformedResponseError,
    NotFoundError,
    UnauthorizedError,
    UnavailableError,
)


def _modules() -> list[str]:
    names = [info.name for info in pkgutil.walk_packages(kuota.__path__, "kuota.")]
    return [name for name in names if not name.endswith(("__main__", "_pb2", "_pb2_grpc"))]


def test_every_exception_class_kuota_defines_is_a_kuota_error() -> None:
    outside = []
    for name in _modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            defined_here = inspect.isclass(value) and value.__module__ == name
            if defined_here and issubclass(value, BaseException) and not issubclass(value, KuotaError):
                outside.append(f"{name}.{value.__qualname__}")
    assert outside == []


def test_the_tree_drawn_in_the_root_module_names_every_package_root() -> None:
    drawn = kuota.errors.__doc__ or ""
    roots = {
        cls.__name__
        for name in _modules()
        for cls in vars(importlib.import_module(name)).values()
        if inspect.isclass(cls) and cls.__module__ == name and KuotaError in cls.__mro__[1:2]
    }
    assert roots and [root for root in sorted(roots) if root not in drawn] == []


def test_a_bad_kubeconfig_is_a_configuration_error() -> None:
    assert issubclass(KubeconfigError, ConfigurationError)


def _answer(status: int, body: bytes = b"") -> ApiResponse:
    return ApiResponse("GET", "/api/v1/pods", status, body)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (400, b"", BadRequestError),
        (401, b"", UnauthorizedError),
        (403, b'{"kind": "Status", "message": "pods is forbidden"}', ForbiddenError),
        (404, b"", NotFoundError),
        (409, b'{"kind": "Status", "reason": "Conflict"}', ConflictError),
        (409, b'{"kind": "Status", "reason": "AlreadyExists"}', AlreadyExistsError),
        (410, b"", GoneError),
        (422, b"", BadRequestError),
        (429, b"", UnavailableError),
        (503, b"", UnavailableError),
    ],
)
def test_a_refused_request_raises_the_error_of_its_cause(status: int, body: bytes, expected: type) -> None:
    with pytest.raises(expected) as raised:
        _answer(status, body).raise_for_status()
    assert type(raised.value) is expected
    assert raised.value.status == status
    assert f"GET /api/v1/pods: HTTP {status}" in str(raised.value)


def test_the_servers_own_words_travel_with_the_error() -> None:
    error = _answer(403, b'{"kind": "Status", "message": "pods is forbidden"}').error()
    assert error.detail == "pods is forbidden"


def test_a_success_that_is_not_a_json_object_is_a_malformed_response() -> None:
    with pytest.raises(MalformedResponseError, match="not an object"):
        _answer(200, b"[1, 2]").object()
