"""The ``kuota certs`` subcommand (argparse only at import time)."""

from __future__ import annotations

import argparse
import sys


class _Certs:
    name = "certs"
    summary = "Print or write a CA, a webhook serving certificate and the caBundle for manual setups."
    example = "kuota certs --service kuota-webhook --namespace kuota-system --out ./tls"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--service", default="kuota-webhook", help="the webhook Service's name")
        parser.add_argument("--namespace", default="kuota-system", help="the webhook Service's namespace")
        parser.add_argument(
            "--ip",
            action="append",
            default=[],
            metavar="IP",
            help="an extra IP SAN (repeatable), e.g. 127.0.0.1",
        )
        parser.add_argument(
            "--dns-name", action="append", default=[], metavar="NAME", help="an extra DNS SAN (repeatable)"
        )
        parser.add_argument("--days", type=int, default=365, help="serving certificate validity in days")
        parser.add_argument(
            "--out",
            default=None,
            help="write ca.crt, ca.key, tls.crt, tls.key and ca-bundle.b64 into this directory, created with mode "
            "0700 when missing; the keys are 0600 (default: print them as PEM to stdout)",
        )

    def run(self, args: argparse.Namespace) -> int:
        import base64
        from datetime import UTC, datetime, timedelta
        from pathlib import Path

        from kuota.certs.authority import ServingIdentity, issue_bundle
        from kuota.certs.errors import CertsError
        from kuota.files import PRIVATE_FILE_MODE, PUBLIC_FILE_MODE, private_folder, write_file

        if args.days < 1:
            print("kuota certs: --days must be at least 1", file=sys.stderr)
            return 2
        try:
            service_identity = ServingIdentity.for_service(args.service, args.namespace, tuple(args.ip))
            identity = ServingIdentity(
                dns_names=service_identity.dns_names + tuple(args.dns_name),
                ip_addresses=service_identity.ip_addresses,
            )
            bundle = issue_bundle(identity, datetime.now(UTC), serving_validity=timedelta(days=args.days))
        except CertsError as error:
            print(f"kuota certs: {error}", file=sys.stderr)
            return 2
        ca_bundle = base64.b64encode(bundle.ca_cert_pem).decode()
        files = {
            "ca.crt": bundle.ca_cert_pem,
            "ca.key": bundle.ca_key_pem,
            "tls.crt": bundle.cert_pem,
            "tls.key": bundle.key_pem,
            "ca-bundle.b64": (ca_bundle + "\n").encode(),
        }
        if args.out is None:
            for name, content in files.items():
                print(f"# {name}")
                print(content.decode().rstrip("\n"))
            return 0
        out = Path(args.out)
        try:
            private_folder(out)
            for name, content in files.items():
                # Keys are 0600 from their first byte, and each file appears whole under its name (a symlink
                # planted at that name is replaced, never followed).
                write_file(out / name, content, mode=PRIVATE_FILE_MODE if name.endswith(".key") else PUBLIC_FILE_MODE)
        except OSError as error:
            print(f"kuota certs: cannot write {error.filename or out}: {error.strerror or error}", file=sys.stderr)
            return 1
        print(f"wrote {', '.join(files)} to {out}; put ca-bundle.b64 into the webhooks' clientConfig.caBundle")
        return 0


CERTS = _Certs()
