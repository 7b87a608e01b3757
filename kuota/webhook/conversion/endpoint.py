"""``POST /convert`` on the admission server's application: the CRDs' conversion webhook.

It shares the admission server's TLS listener, certificate and limits (bodies over the application's
``client_max_size`` get 413; header and body deadlines from :mod:`kuota.http_serving`). Every other answer is a
ConversionReview with HTTP 200: a malformed review or an unconvertible object gets ``result.status: Failure``
and a message; a bug is logged with its traceback and answered the same way, never as a bare 500.
"""

from __future__ import annotations

import logging

from aiohttp import web

from kuota.http_serving import json_response, request_body
from kuota.webhook.conversion.errors import ConversionError, MalformedConversionReviewError
from kuota.webhook.conversion.reviews import convert_all, decode_review, failure, parse_review, success
from kuota.webhook.crds.versions import CONVERSION_PATH

log = logging.getLogger(__name__)


async def _convert(request: web.Request) -> web.Response:
    body = await request_body(request)
    uid = ""
    try:
        review = parse_review(decode_review(body))
        uid = review.uid
        answer = success(uid, convert_all(review))
    except MalformedConversionReviewError as error:
        answer = failure(error.uid, error.message)
    except ConversionError as error:
        answer = failure(uid, error.message)
    except Exception:
        log.exception("conversion webhook failed on review %s", uid or "(no uid)")
        answer = failure(uid, f"kuota's conversion webhook failed; see the manager log (uid {uid or 'none'})")
    return json_response(answer)


def add_conversion_route(app: web.Application) -> None:
    """Serve ``POST /convert`` on ``app`` (before it starts)."""
    app.router.add_post(CONVERSION_PATH, _convert)
