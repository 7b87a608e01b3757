"""``kuota manager``: the webhook and the quota controller in one process.

Every replica serves the webhook (TLS, certificates shared through a Secret or mounted by cert-manager) and
keeps the caches it reads; only the replica holding the Lease runs the controller, and answers Kueue's
visibility API on the same server from the controller's engine (:mod:`kuota.webhook.visibility`). SIGTERM stops the
controller first and releases the Lease, so a successor admits within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kuota.certs.authority import ServingIdentity
from kuota.certs.ca_bundle_injection import WebhookConfigurations
from kuota.certs.rotation import DirectoryCertificates, SecretBackedCertificates
from kuota.certs.secret_store import SecretLocation, read_bundle
from kuota.certs.serving_context import ReloadableServerContext
from kuota.engine import KUEUE_DEFAULTS, Configuration, LabelSelector, Requirement, parse_configuration
from kuota.errors import ConfigurationError, KuotaError
from kuota.http_serving import serve
from kuota.kube.client import KubeApi
from kuota.kube.errors import KubeApiError
from kuota.malloc_trim import release_free_pages_periodically
from kuota.webhook.admission.endpoints import WebhookEndpoint, kuota_rules, webhook_configurations
from kuota.webhook.admission.job_policy import JobPolicy, KuotaIdentity
from kuota.webhook.admission.reflected_cluster import ReflectedClusterFacts
from kuota.webhook.admission.server import AdmissionRoutes, AdmissionServer, ReadinessCheck, build_app
from kuota.webhook.controller.api_writes import (
    CUSTOM_RESOURCE_DEFINITIONS,
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
    ApiWriter,
)
from kuota.webhook.controller.leader_election import LeaderElector
from kuota.webhook.controller.metrics import FOLLOWER, LEADER, STANDALONE, ControllerMetrics
from kuota.webhook.controller.quota_controller import QuotaController
from kuota.webhook.conversion.endpoint import add_conversion_route
from kuota.webhook.crds.definitions import DEFINITIONS
from kuota.webhook.crds.versions import CONVERSION_PATH, conversion, conversion_service_name
from kuota.webhook.jobs.pod_parents import PARENTS
from kuota.webhook.jobs.registry import ADAPTERS, DEFAULT_REGISTRY, POD_FRAMEWORK, Registry, select
from kuota.webhook.metrics_access import MetricsAccess
from kuota.webhook.visibility.front_proxy import FrontProxy
from kuota.webhook.visibility.leader_pod import ServingLabel
from kuota.webhook.visibility.routes import (
    ADMISSION_ESTIMATE,
    VisibilityAccess,
    VisibleState,
    add_visibility_routes,
    visibility_service_name,
)

log = logging.getLogger("kuota.manager")

SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
# The CRDs whose v1beta1 the webhook converts: their conversion clientConfig gets the webhook's CA.
CONVERTED_CRDS = tuple(definition.name for definition in DEFINITIONS)


class ManagerError(KuotaError):
    """The manager cannot start as configured; the message says which flag or file to fix."""


@dataclass(frozen=True)
class ManagerOptions:
    kubeconfig: Path | None  # None, unless in_cluster: the files KUBECONFIG lists, else ~/.kube/config
    config: Path | None
    namespace: str
    identity: str
    webhook_host: str
    webhook_port: int
    metrics_host: str
    metrics_port: int
    health_host: str
    health_port: int
    leader_elect: bool
    lease_name: str
    service_name: str
    cert_secret: str
    cert_dir: Path | None
    mutating_webhook_config: str
    validating_webhook_config: str
    webhook_url: str | None
    webhook_ips: tuple[str, ...]
    failure_policy: Literal["Fail", "Ignore"]
    job_namespace_selector: dict[str, Any] | None = None
    lease_duration: float = 15.0
    workload_retention: float = 8 * 24 * 3600
    eta_interval: float = 5.0  # seconds between admission-ETA recomputations; 0: no ETAs
    # HTTPS with the serving certificate, and only for callers allowed to get /metrics (as Kueue serves it).
    metrics_secure: bool = True
    context: str | None = None  # the kubeconfig's context to use; None: its current-context
    in_cluster: bool = False  # the pod's service account instead of a kubeconfig
    # Kueue's visibility API on the webhook's server, for the API server's front proxy (kuota.webhook.visibility).
    visibility: bool = True
    # The visibility API's APIServices, whose caBundle the manager keeps set (none: not registered in-cluster).
    visibility_api_services: tuple[str, ...] = ()
    # In a cluster: keep the label the visibility Service selects on this Pod (named by identity) while it answers.
    visibility_serving_label: bool = False


def load_configuration(path: Path | None, own_namespace: str) -> tuple[Configuration, Registry]:
    """The Configuration file, or Kueue's defaults; jobs in kube-system and kuota's namespace are never managed.
    With it, the integrations it enables (:func:`read_integrations`).

    waitForPodsReady is on by default, as in Kueue v0.19+ (its defaults: a 30 minute timeout); the file's
    ``featureGates: {DisableWaitForPodsReady: true}`` turns it off, as Kueue's feature gate of that name does."""
    document: Any = None
    if path is None:
        configuration, integrations = KUEUE_DEFAULTS, DEFAULT_REGISTRY
    else:
        try:
            document = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as error:
            raise ManagerError(f"--config {path}: {error}") from error
        configuration = parse_configuration(document)
        integrations = read_integrations(document, f"--config {path}")
    if configuration.managed_jobs_namespace_selector is None:
        excluded = Requirement("kubernetes.io/metadata.name", "NotIn", ("kube-system", own_namespace))
        configuration = Configuration(
            manage_jobs_without_queue_name=configuration.manage_jobs_without_queue_name,
            managed_jobs_namespace_selector=LabelSelector(match_expressions=(excluded,)),
            wait_for_pods_ready=configuration.wait_for_pods_ready,
            fair_sharing=configuration.fair_sharing,
        )
    return configuration, integrations


def read_integrations(document: Any, where: str) -> Registry:
    """``integrations.frameworks`` of a Kueue Configuration (parse_configuration checked the document's shape):
    the kinds to manage. Absent: ``batch/job`` only, as in Kueue. A name Kueue knows but kuota does not implement is
    skipped with a warning; a name nobody knows is refused."""
    integrations = document.get("integrations") if isinstance(document, dict) else None
    if integrations is None:
        return DEFAULT_REGISTRY
    if not isinstance(integrations, dict):
        raise ManagerError(f"{where}: integrations must be an object with a frameworks list")
    frameworks = integrations.get("frameworks")
    if frameworks is None:
        return DEFAULT_REGISTRY
    if not isinstance(frameworks, list) or not all(isinstance(name, str) for name in frameworks):
        raise ManagerError(f'{where}: integrations.frameworks must be a list of names, e.g. ["batch/job", "pod"]')
    selection = select(frameworks)
    if selection.unknown:
        names = {*(adapter.framework for adapter in ADAPTERS), *(parent.framework for parent in PARENTS), POD_FRAMEWORK}
        implemented = ", ".join(sorted(names))
        raise ManagerError(
            f"{where}: integrations.frameworks names {', '.join(map(repr, selection.unknown))}, which no integration "
            f"has; kuota implements {implemented}"
        )
    for name in selection.unimplemented:
        log.warning("integrations.frameworks: %s is a Kueue integration kuota does not implement; skipped", name)
    log.info("managing %s", ", ".join(selection.registry.frameworks) or "no kind of job")
    return selection.registry


async def _whoami(api: KubeApi) -> KuotaIdentity:
    """kuota's own API identity, asked of the API server, so the webhook recognises the controller's writes."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = (await api.request("POST", SELF_SUBJECT_REVIEWS, body=review)).object()
    except KubeApiError as error:
        raise ManagerError(f"cannot ask the API server who kuota is ({error}); check --kubeconfig and RBAC") from error
    username = ((answer.get("status") or {}).get("userInfo") or {}).get("username")
    if not isinstance(username, str) or not username:
        raise ManagerError(f"the API server's SelfSubjectReview named no user: {answer.get('status')!r}")
    log.info("manager acts as %s", username)
    return KuotaIdentity(usernames=frozenset({username}))


@dataclass
class Manager:
    options: ManagerOptions
    configuration: Configuration = field(default_factory=Configuration)
    integrations: Registry = DEFAULT_REGISTRY
    metrics: ControllerMetrics = field(default_factory=ControllerMetrics)
    certificates_ready: asyncio.Event = field(default_factory=asyncio.Event)
    controller: QuotaController | None = None
    webhook_port: int = 0

    async def run(self, stop: asyncio.Event) -> None:
        options = self.options
        try:
            api = (
                KubeApi.in_cluster()
                if options.in_cluster
                else KubeApi.from_kubeconfig(options.kubeconfig, options.context)
            )
        except ConfigurationError as error:
            raise ManagerError(str(error)) from error
        async with api:
            self.configuration, self.integrations = load_configuration(options.config, options.namespace)
            await self._serve(api, stop)

    async def _serve(self, api: KubeApi, stop: asyncio.Event) -> None:
        options = self.options
        context = ReloadableServerContext()
        facts = ReflectedClusterFacts.from_api(api)
        selector = self.configuration.managed_jobs_namespace_selector or LabelSelector()
        policy = JobPolicy(
            manage_jobs_without_queue_name=self.configuration.manage_jobs_without_queue_name,
            managed_jobs_namespace_selector=selector,
            kuota=await _whoami(api),
            integrations=self.integrations,
        )
        readiness = [
            ReadinessCheck("webhook certificates loaded", lambda: context.loaded),
            ReadinessCheck("caches synced", facts.synced),
        ]
        app = build_app(AdmissionRoutes(rules=kuota_rules(policy, facts), readiness=readiness))
        add_conversion_route(app)
        front_proxy = FrontProxy(api, context.context) if options.visibility else None
        if front_proxy is not None:
            add_visibility_routes(app, self._visible_state, VisibilityAccess(api, front_proxy))
        server = AdmissionServer(app, context.context, options.webhook_host, options.webhook_port)
        self.controller = QuotaController(
            api,
            self.configuration,
            self.metrics,
            workload_retention=options.workload_retention,
            eta_interval=options.eta_interval,
            registry=self.integrations,
        )
        elector = LeaderElector(
            ApiWriter(api, self.metrics),
            options.namespace,
            options.lease_name,
            options.identity,
            lease_duration=options.lease_duration,
            renew_deadline=options.lease_duration * 2 / 3,
            retry_period=options.lease_duration / 7.5,
        )
        self.metrics.replica_role = FOLLOWER if options.leader_elect else STANDALONE
        runners: list[web.AppRunner] = []
        try:
            runners.append(await server.start())
            self.webhook_port = server.bound_port
            runners.append(await self._metrics_server(api, context))
            health = build_app(AdmissionRoutes({}, readiness))
            runners.append(await self._plain_server(health, options.health_host, options.health_port))
            async with asyncio.TaskGroup() as group:
                background = [
                    group.create_task(self._certificates(api, context)),
                    group.create_task(facts.run()),
                    group.create_task(release_free_pages_periodically()),
                ]
                if front_proxy is not None:
                    background.append(group.create_task(front_proxy.run()))
                if options.webhook_url is not None:
                    background.append(group.create_task(self._register_by_url(api)))
                if options.visibility and options.visibility_serving_label:
                    label = ServingLabel(
                        ApiWriter(api, self.metrics, attempts=2),
                        options.namespace,
                        options.identity,
                        lambda: self._visible_state() is not None,
                    )
                    background.append(group.create_task(label.run()))
                work = group.create_task(elector.run(self._lead) if options.leader_elect else self.controller.run())
                await stop.wait()
                log.info("stopping: controller first, then the Lease, then the webhook")
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
                if options.leader_elect:
                    await elector.release()
                for task in background:
                    task.cancel()
        finally:
            for runner in runners:
                await runner.cleanup()
            await self.controller.close()

    async def _certificates(self, api: KubeApi, context: ReloadableServerContext) -> None:
        options = self.options
        source: DirectoryCertificates | SecretBackedCertificates
        if options.cert_dir is not None:
            source = DirectoryCertificates(options.cert_dir, context)
        else:
            source = SecretBackedCertificates(
                api=api,
                secret=SecretLocation(options.namespace, options.cert_secret),
                identity=_serving_identity(options),
                # Registered by URL, the configurations are written with the CA by _register_by_url instead.
                configurations=WebhookConfigurations()
                if options.webhook_url is not None
                else WebhookConfigurations(
                    mutating=(options.mutating_webhook_config,),
                    validating=(options.validating_webhook_config,),
                    conversion=CONVERTED_CRDS,
                    api_services=options.visibility_api_services,
                ),
                context=context,
            )
        await source.run(self.certificates_ready)

    async def _register_by_url(self, api: KubeApi) -> None:
        """Out of cluster: create kuota's webhook configurations, and point kuota's CRDs' conversion webhook, at
        ``--webhook-url``."""
        options = self.options
        assert options.webhook_url is not None
        await self.certificates_ready.wait()
        stored = await read_bundle(api, SecretLocation(options.namespace, options.cert_secret), 10)
        if stored is None:
            raise ManagerError(f"Secret {options.namespace}/{options.cert_secret} vanished after certificates loaded")
        endpoint = WebhookEndpoint(url=options.webhook_url)
        mutating, validating = webhook_configurations(
            endpoint,
            stored.bundle.ca_cert_pem,
            failure_policy=options.failure_policy,
            namespace_selector=options.job_namespace_selector,
            integrations=self.integrations,
        )
        mutating["metadata"]["name"] = options.mutating_webhook_config
        validating["metadata"]["name"] = options.validating_webhook_config
        writer = ApiWriter(api, self.metrics)
        for resource, body in ((MUTATING_WEBHOOKS, mutating), (VALIDATING_WEBHOOKS, validating)):
            name = body["metadata"]["name"]
            if await writer.get(resource, None, name) is None:
                await writer.create(resource, None, body)
            else:
                await writer.merge_patch(resource, None, name, {"webhooks": body["webhooks"]})
        client_config = endpoint.client_config(CONVERSION_PATH, stored.bundle.ca_cert_pem)
        for name in CONVERTED_CRDS:
            crd = await writer.get(CUSTOM_RESOURCE_DEFINITIONS, None, name)
            if crd is None:
                raise ManagerError(f"CustomResourceDefinition {name} is not installed; install kuota's CRDs first")
            if crd["spec"].get("conversion") != conversion(client_config):
                # A merge patch would keep the Service beside the URL; null removes it.
                patch = {"spec": {"conversion": conversion({"service": None, **client_config})}}
                await writer.merge_patch(CUSTOM_RESOURCE_DEFINITIONS, None, name, patch)
        log.info("webhooks registered at %s", options.webhook_url)

    def _visible_state(self) -> VisibleState | None:
        """What the visibility API answers from: the controller's engine, on the replica that runs it."""
        controller = self.controller
        if controller is None or not controller.ready.is_set() or self.metrics.replica_role == FOLLOWER:
            return None
        workloads = controller.workloads
        etas = controller.etas

        def metadata(key: str) -> dict[str, Any] | None:
            found = workloads.get(key)
            return None if found is None else found.get("metadata")

        def estimate(key: str) -> dict[str, Any] | None:
            """kuota's admission estimate, beside Kueue's fields (its clients ignore fields they do not know)."""
            found = etas.eta_of(key)
            return None if found is None else {ADMISSION_ESTIMATE: found.as_json()}

        return VisibleState(controller.engine, metadata, estimate)

    async def _lead(self) -> None:
        """Run the controller while holding the Lease; the metrics say ``leader`` only meanwhile."""
        assert self.controller is not None
        self.metrics.replica_role = LEADER
        try:
            await self.controller.run()
        finally:
            self.metrics.replica_role = FOLLOWER

    async def _metrics_server(self, api: KubeApi, context: ReloadableServerContext) -> web.AppRunner:
        """``/metrics`` over HTTPS with the webhook's serving certificate, for allowed callers only; plain HTTP
        for anyone with ``--no-metrics-secure``."""
        options = self.options
        app = self._metrics_app()
        if not options.metrics_secure:
            return await self._plain_server(app, options.metrics_host, options.metrics_port)
        app.middlewares.append(MetricsAccess(api).guard)
        return (await serve(app, options.metrics_host, options.metrics_port, ssl_context=context.context)).runner

    def _metrics_app(self) -> web.Application:
        app = web.Application()

        async def metrics(request: web.Request) -> web.Response:
            del request
            body = generate_latest(self.metrics.registry)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app.router.add_get("/metrics", metrics)
        return app

    @staticmethod
    async def _plain_server(app: web.Application, host: str, port: int) -> web.AppRunner:
        return (await serve(app, host, port)).runner


def _serving_identity(options: ManagerOptions) -> ServingIdentity:
    """The admission webhook's Service names, the conversion webhook's and the visibility API's Service names,
    and ``--webhook-ip``."""
    admission = ServingIdentity.for_service(options.service_name, options.namespace, options.webhook_ips)
    converting = ServingIdentity.for_service(conversion_service_name(options.service_name), options.namespace)
    visibility = ServingIdentity.for_service(visibility_service_name(options.service_name), options.namespace)
    return ServingIdentity(admission.dns_names + converting.dns_names + visibility.dns_names, admission.ip_addresses)


async def run_manager(options: ManagerOptions) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await Manager(options).run(stop)
