"""A fake kubeconfig exec credential plugin: a small Python script that records each run and answers in turn.

The test writes the answers (``answer(...)``): run N prints answer N (the last one again once they run out).
Each run appends its arguments, KUBERNETES_EXEC_INFO and the PLUGIN_GREETING variable to a calls file.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_SCRIPT = """#!{python}
import json, os, pathlib, sys
here = pathlib.Path({folder!r})
with (here / "calls.jsonl").open("a") as calls:
    seen = {{
        "args": sys.argv[1:],
        "exec_info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]),
        "greeting": os.environ.get("PLUGIN_GREETING"),
        "stdin": sys.stdin.read(),
    }}
    calls.write(json.dumps(seen) + "\\n")
runs = len((here / "calls.jsonl").read_text().splitlines())
answers = json.loads((here / "answers.json").read_text())
answer = answers[min(runs, len(answers)) - 1]
sys.stderr.write(answer.get("stderr", ""))
sys.stdout.write(answer.get("stdout", ""))
sys.exit(answer.get("exit", 0))
"""


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def credential(
    api_version: str = "client.authentication.k8s.io/v1",
    *,
    token: str | None = None,
    certificate: str | None = None,
    key: str | None = None,
    expires_at: float | None = None,
) -> dict[str, Any]:
    """An answer that prints an ExecCredential with these fields of status (PEM text for the pair)."""
    status: dict[str, Any] = {}
    if token is not None:
        status["token"] = token
    if certificate is not None:
        status["clientCertificateData"] = certificate
    if key is not None:
        status["clientKeyData"] = key
    if expires_at is not None:
        status["expirationTimestamp"] = rfc3339(expires_at)
    return {"stdout": json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status})}


@dataclass(frozen=True)
class FakePlugin:
    folder: Path

    @classmethod
    def install(cls, folder: Path) -> FakePlugin:
        folder.mkdir(parents=True, exist_ok=True)
        plugin = cls(folder)
        plugin.command.write_text(_SCRIPT.format(python=sys.executable, folder=str(folder)))
        plugin.command.chmod(0o755)
        return plugin

    @property
    def command(self) -> Path:
        return self.folder / "fake-credential-plugin"

    def answer(self, *answers: dict[str, Any]) -> None:
        (self.folder / "answers.json").write_text(json.dumps(list(answers)))

    def calls(self) -> list[dict[str, Any]]:
        path = self.folder / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def exec_entry(self, api_version: str = "client.authentication.k8s.io/v1", **extra: Any) -> dict[str, Any]:
        """The kubeconfig user's ``exec`` running this plugin."""
        entry: dict[str, Any] = {"apiVersion": api_version, "command": str(self.command), **extra}
        if api_version.endswith("/v1"):
            entry.setdefault("interactiveMode", "Never")
        return entry
