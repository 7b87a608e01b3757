"""Webhook latency over TLS: p50/p99 and throughput at 200 and 1,000 requests/s (target p99 <= 5 ms at 1,000/s),
for Job creates and for Pod creates (with the ``pod`` integration every pod create in a labelled namespace is a
review; the benchmark's pod carries the queue label, so each review answers with the gating patch), in one run.

The admission server runs in this process pinned to one core; the load comes from vegeta (Go, built into
the cache like the control-plane binaries), pinned to the other core, so the figures are the server's and
not a Python client's. Load is open-loop at a constant rate (vegeta's latency counts from each request's
due time), over keep-alive TLS connections, as the API server keeps them. The baseline is ``/healthz`` over
the same connections at the same rate. The server's answer is checked to be an allowed AdmissionReview first.

Run: ``.venv/bin/python benchmarks/webhook_latency.py [--seconds 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import ssl
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kuota.certs.authority import ServingIdentity, issue_bundle
from kuota.certs.serving_context import ReloadableServerContext
from kuota.engine.model import LabelSelector
from kuota.webhook.admission.endpoints import kuota_rules
from kuota.webhook.admission.job_policy import JobPolicy, KuotaIdentity
from kuota.webhook.admission.pod_policy import MUTATE_POD_PATH
from kuota.webhook.admission.server import AdmissionRoutes, AdmissionServer, build_app
from kuota.webhook.jobs.registry import select
from tests.cluster.binaries import ensure_vegeta

CONNECTIONS = 8
MUTATE_JOB_PATH = "/mutate-batch-v1-job"


@dataclass(frozen=True)
class StaticFacts:
    def local_queue_exists(self, namespace: str, name: str) -> bool:
        return name == "default"

    def priority_class_exists(self, name: str) -> bool:
        return name == "default"

    def job_workload_admitted(self, namespace: str, job_uid: str) -> bool:
        return False

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": namespace}


def _pod() -> dict[str, Any]:
    """A notebook pod as a user writes it, labelled for its queue."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "notebook-",
            "namespace": "research",
            "labels": {"kueue.x-k8s.io/queue-name": "research-queue", "app": "notebook"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "notebook",
                    "image": "jupyter/base-notebook:latest",
                    "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1}},
                }
            ],
        },
    }


def _review(index: int, path: str = MUTATE_JOB_PATH) -> bytes:
    if path == MUTATE_POD_PATH:
        request = {
            "uid": f"uid-{index}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "research",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": _pod(),
        }
        return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": "llm-finetune-", "namespace": "research"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "ghcr.io/your-org/trainer:1.0",
                            "resources": {"requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": 4}},
                        }
                    ],
                }
            },
        },
    }
    request = {
        "uid": f"uid-{index}",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "operation": "CREATE",
        "namespace": "research",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": job,
    }
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


def _allowed(url: str, path: str, ca_pem: str) -> bool:
    """One review by hand: the server answers an allowed, well-formed AdmissionReview with a patch (the Job's
    suspension, the Pod's gate)."""
    request = urllib.request.Request(url + path, data=_review(0, path), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=ssl.create_default_context(cadata=ca_pem), timeout=10) as answer:
        review = json.loads(answer.read())
    response = review["response"]
    return bool(response["allowed"]) and response["uid"] == "uid-0" and bool(response.get("patch"))


async def _attack(vegeta: Path, folder: Path, url: str, rate: int, seconds: float) -> dict[str, Any]:
    """Run vegeta on the other core at a constant rate; its report's latencies are in nanoseconds."""
    if url.endswith("/healthz"):
        targets = f"GET {url}\n"
    else:
        body = folder / "review.json"
        body.write_bytes(_review(0, url[url.index("/", len("https://")) :]))
        targets = f"POST {url}\nContent-Type: application/json\n@{body}\n"
    (folder / "targets.txt").write_text(targets)
    attack = (
        f"taskset -c 1 {vegeta} attack -rate={rate}/s -duration={seconds}s -targets={folder / 'targets.txt'} "
        f"-root-certs={folder / 'ca.pem'} -connections={CONNECTIONS} -max-connections={CONNECTIONS} "
        f"| taskset -c 1 {vegeta} report -type=json"
    )
    process = await asyncio.create_subprocess_shell(
        attack, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ, GOMAXPROCS="1")
    )
    out, err = await asyncio.wait_for(process.communicate(), seconds * 10 + 60)
    if process.returncode != 0:
        raise RuntimeError(f"vegeta failed ({process.returncode}): {err.decode()[-2000:]}")
    report: dict[str, Any] = json.loads(out)
    return report


@dataclass(frozen=True)
class Step:
    path: str
    rate: int
    report: dict[str, Any]
    server_cpu: float

    def ms(self, key: str) -> float:
        return float(self.report["latencies"][key]) / 1e6

    @property
    def errors(self) -> int:
        return int(self.report["requests"]) - int(self.report["status_codes"].get("200", 0))


async def _serve_and_measure(seconds: float, vegeta: Path, folder: Path) -> list[Step]:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    bundle = issue_bundle(ServingIdentity(dns_names=("localhost",), ip_addresses=("127.0.0.1",)), datetime.now(UTC))
    (folder / "ca.pem").write_bytes(bundle.ca_cert_pem)
    context = ReloadableServerContext()
    context.load(bundle.cert_pem, bundle.key_pem)
    integrations = select(["batch/job", "pod"]).registry
    policy = JobPolicy(False, LabelSelector(), KuotaIdentity(frozenset({"kuota"})), integrations)
    server = AdmissionServer(
        build_app(AdmissionRoutes(kuota_rules(policy, StaticFacts()))), context.context, host="127.0.0.1", port=0
    )
    runner = await server.start()
    url = f"https://127.0.0.1:{server.bound_port}"
    steps = []
    try:
        for path in (MUTATE_JOB_PATH, MUTATE_POD_PATH):
            if not await asyncio.to_thread(_allowed, url, path, bundle.ca_cert_pem.decode()):
                raise RuntimeError(f"the webhook did not answer the benchmark's review at {path} with a patch")
        plan = [("/healthz", 1000), (MUTATE_JOB_PATH, 200), (MUTATE_JOB_PATH, 1000)]
        plan += [(MUTATE_POD_PATH, 200), (MUTATE_POD_PATH, 1000)]
        for path, rate in plan:
            cpu_before = resource.getrusage(resource.RUSAGE_SELF)
            report = await _attack(vegeta, folder, url + path, rate, seconds)
            cpu_after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
            steps.append(Step(path, rate, report, cpu))
    finally:
        await runner.cleanup()
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each load step")
    args = parser.parse_args()
    vegeta = ensure_vegeta()
    with tempfile.TemporaryDirectory(prefix="webhook-latency-") as scratch:
        steps = asyncio.run(_serve_and_measure(args.seconds, vegeta, Path(scratch)))
    baseline_p99 = steps[0].ms("99th")
    print(f"webhook latency over TLS, server on 1 core, vegeta on the other, {CONNECTIONS} keep-alive connections")
    header = f"{'endpoint':<22}{'target/s':>9}{'sent':>7}{'ok/s':>8}{'errors':>7}{'p50 ms':>9}{'p99 ms':>9}"
    print(header + f"{'max ms':>9}{'p99/base':>10}{'server CPU us/req':>19}")
    for step in steps:
        sent = int(step.report["requests"])
        print(
            f"{step.path:<22}{step.rate:>9}{sent:>7}{float(step.report['throughput']):>8.0f}"
            f"{step.errors:>7}{step.ms('50th'):>9.2f}{step.ms('99th'):>9.2f}"
            f"{step.ms('max'):>9.2f}{step.ms('99th') / baseline_p99:>10.2f}"
            f"{step.server_cpu / sent * 1e6:>19.0f}"
        )
    for kind, step in (("Job", steps[2]), ("Pod", steps[4])):
        target = step.ms("99th")
        print(f"{kind}: target p99 <= 5 ms at 1,000/s: {'met' if target <= 5 else 'NOT met'} ({target:.2f} ms)")
    print(f"load average during the run (2 cores shared with other work shows here): {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
