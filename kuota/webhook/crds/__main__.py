"""``python -m kuota.webhook.crds --out DIR``: write one YAML file per CRD (or all of them to stdout)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from kuota.webhook.crds import crd_manifests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kuota.webhook.crds", description=__doc__)
    parser.add_argument("--out", type=Path, help="directory for <plural>.kueue.x-k8s.io.yaml files")
    args = parser.parse_args(argv)
    manifests = crd_manifests()
    if args.out is None:
        yaml.safe_dump_all(manifests, sys.stdout, sort_keys=False)
        return 0
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        for manifest in manifests:
            path = args.out / f"{manifest['metadata']['name']}.yaml"
            path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    except OSError as error:
        print(f"cannot write CRDs to {args.out}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {len(manifests)} CRDs to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
