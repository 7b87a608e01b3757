"""RFC 6901 pointers as the API server reads them."""

from __future__ import annotations

import base64
import json

from kuota.webhook.admission.json_patch import add, encode, pointer


def test_slash_in_a_label_key_is_escaped_as_tilde_one() -> None:
    assert pointer("metadata", "labels", "kueue.x-k8s.io/queue-name") == "/metadata/labels/kueue.x-k8s.io~1queue-name"


def test_tilde_is_escaped_before_slash_so_the_two_never_mix() -> None:
    assert pointer("a~/b") == "/a~0~1b"


def test_encoded_patch_is_base64_of_the_operations() -> None:
    operations = [add(True, "spec", "suspend")]
    assert json.loads(base64.b64decode(encode(operations))) == [{"op": "add", "path": "/spec/suspend", "value": True}]
