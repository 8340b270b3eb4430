"""Composition root: ``create_app(settings)`` wires clients, pod source, provider and routes.

Importing this module does nothing; the lifespan opens the HTTP client and starts the pod source, and
closes them on shutdown. Tests pass their own provider, pod source, clock or httpx transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

import httpx
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from adapter.api.external import ExternalStorage
from adapter.api.groups import EXTERNAL_PREFIX, PREFIX
from adapter.api.storage import Storage
from adapter.auth.middleware import AuthMiddleware
from adapter.auth.setup import Security
from adapter.auth.user import UserInfo, metric_read_attributes
from adapter.forecast_service import ForecastService
from adapter.heap import FullCollections
from adapter.observability import Observability
from adapter.pods.base import PodSource
from adapter.provider.base import MetricsProvider
from adapter.provider.dispatch import Dispatcher, ExternalDispatcher
from adapter.provider.external import ExternalProvider
from adapter.provider.promadapter import RulesProvider, RulesSetup
from adapter.provider.prometheus import PrometheusProvider
from adapter.query.client import PromClient, open_backend
from adapter.routes import custom_metrics, external_metrics, system
from adapter.routes import observability as observability_routes
from adapter.routes.http import plain_not_found
from adapter.routes.limits import SizeLimit
from adapter.settings import Settings

log = logging.getLogger(__name__)


def make_pod_source(settings: Settings, client: PromClient, clock: Callable[[], float]) -> PodSource:
    if settings.pod_source == "kubernetes":
        from adapter.pods.kubernetes import KubernetesPodSource  # imported only when used: it loads the k8s client

        return KubernetesPodSource(kubeconfig=settings.kubeconfig)
    from adapter.pods.prometheus import PrometheusPodSource

    return PrometheusPodSource(client, settings.catalog, clock, ttl_s=settings.pod_cache_ttl_s)


def create_app(
    settings: Settings,
    *,
    provider: MetricsProvider | None = None,
    pod_source: PodSource | None = None,
    clock: Callable[[], float] = time.time,
    transport: httpx.AsyncBaseTransport | None = None,
    security: Security | None = None,
    prometheus_adapter: RulesSetup | None = None,
) -> FastAPI:
    """Build the ASGI app. With ``provider`` given, no backend client is opened (unit tests).
    With ``security``, every request is authenticated and authorized first (adapter/auth).
    With ``prometheus_adapter``, its rules are served beside the catalog (``provider/dispatch.py``)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.loop = asyncio.get_running_loop()  # lets tests and diagnostics inspect the loop's tasks
        if security is not None:
            security.start()
        try:
            async with _components(app):
                yield
        finally:
            if security is not None:
                await security.close()

    @contextlib.asynccontextmanager
    async def _components(app: FastAPI) -> AsyncIterator[None]:
        if provider is not None:
            app.state.storage = Storage(provider)
            app.state.external_storage = ExternalStorage(None)  # a custom metrics provider serves no external metric
            app.state.metrics_provider = provider
            app.state.pod_source = pod_source
            yield
            return
        async with open_backend(settings, transport=transport, observer=obs.upstream_query) as client:
            pods = pod_source or make_pod_source(settings, client, clock)
            await pods.start()
            forecasts = None
            app.state.provider = None
            rules: RulesProvider | None = None
            if settings.catalog.forecast is not None:
                forecasts = ForecastService(
                    settings.catalog.forecast,
                    settings.catalog,
                    client,
                    clock,
                    tick_s=settings.forecast_tick_s,
                    observer=obs,
                )
                obs.watch_forecasts(forecasts)
                forecasts.start()
            collections = app.state.collections = FullCollections()
            try:
                prov = PrometheusProvider(
                    settings.catalog, client, pods, clock, forecasts, observer=obs, store=settings.catalog.store
                )
                await prov.start()
                obs.watch_store(prov.value_store)
                app.state.forecasts = forecasts
                app.state.provider = prov
                app.state.client = client
                app.state.pod_source = pods
                external = ExternalProvider(prov)
                app.state.storage = Storage(prov)
                app.state.external_storage = ExternalStorage(external)
                app.state.metrics_provider = prov
                app.state.explain_source = prov  # /explain's narrow interface (explain.ExplainSource)
                if prometheus_adapter is not None:
                    rules = await _serve_rules(app, prometheus_adapter, prov, external, client, pods)
                # Full GC passes on a schedule (adapter/heap.py): CPython's own, every few seconds at 1,000 HPAs,
                # were the slowest requests.
                collections.start()
                yield
            finally:
                await collections.stop()
                if rules is not None:
                    await rules.close()
                if forecasts is not None:
                    await forecasts.close()
                if app.state.provider is not None:
                    await app.state.provider.close()
                await pods.close()

    async def _serve_rules(
        app: FastAPI,
        setup: RulesSetup,
        prov: PrometheusProvider,
        external: ExternalProvider,
        client: PromClient,
        pods: PodSource,
    ) -> RulesProvider:
        store = settings.catalog.store if setup.stored else None
        objects = setup.objects
        if objects is None and settings.pod_source == "kubernetes":
            from adapter.pods.objects import KubeObjects  # imported only when used: it loads the k8s client

            objects = KubeObjects(kubeconfig=settings.kubeconfig)
        rules = RulesProvider(
            setup.config,
            client,
            pods,
            clock,
            relist=setup.relist,
            store=store,
            on_modes=obs.rule_modes,
            objects=objects,
        )
        await rules.start()
        dispatcher = Dispatcher(prov, rules)
        external_dispatcher = ExternalDispatcher(external, rules)
        warned: set[str] = set()

        def warn_clashes() -> None:
            # At start-up, then after every re-list (new series can bring a new clash): each name once.
            clashes = dispatcher.clashes() + [f"external metric {n}" for n in external_dispatcher.clashes()]
            for name in clashes:
                if name not in warned:
                    warned.add(name)
                    log.warning("prometheus-adapter rules: %s is the catalog's too; the catalog answers it", name)

        warn_clashes()
        rules.on_listed = warn_clashes
        app.state.rules_provider = rules
        app.state.storage = Storage(dispatcher, dispatcher.resolve)
        app.state.metrics_provider = dispatcher
        app.state.external_storage = ExternalStorage(external_dispatcher)
        return rules

    app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    app.state.settings = settings
    obs = Observability(clock=clock)  # its own registry, one per app: nothing global
    obs.catalog_in_use(settings.catalog)
    app.state.observability = obs
    app.state.external_storage = ExternalStorage(None)  # until the lifespan has built the providers
    app.add_route("/apis", external_metrics.apis, methods=["GET"])  # lists both groups; before custom_metrics' own
    custom_metrics.add_routes(app)
    app.add_route(EXTERNAL_PREFIX, external_metrics.group, methods=["GET"])
    app.add_route(EXTERNAL_PREFIX + "/{rest:path}", external_metrics.metrics_api, methods=custom_metrics.ALL_METHODS)
    app.add_route("/livez", system.livez, methods=["GET"])
    app.add_route("/healthz", system.livez, methods=["GET"])
    app.add_route("/readyz", system.readyz, methods=["GET"])
    app.add_route("/version", system.version, methods=["GET"])
    app.add_route("/openapi/v2", system.openapi, methods=["GET"])
    app.add_route("/openapi/v3", system.openapi_v3, methods=["GET"])
    app.add_route(f"/openapi/v3{PREFIX}/{{version}}", system.openapi_v3_group_version, methods=["GET"])
    observability_routes.add_routes(app)

    async def not_found(request: Request, exc: Exception) -> Response:
        return plain_not_found()

    app.add_exception_handler(404, not_found)
    app.add_exception_handler(405, not_found)
    if security is not None:
        authorizer = security.authorizer

        async def may_read_metric(user: UserInfo, namespace: str, metric: str) -> bool:
            """/explain's review for each further metric an HPA manifest names: as reading it through the API."""
            allowed, _ = await authorizer.authorize(metric_read_attributes(user, namespace, metric))
            return allowed

        app.state.may_read_metric = may_read_metric
        app.add_middleware(AuthMiddleware, authenticator=lambda: security.authenticator, authorizer=security.authorizer)
    # Added last, so it is the outermost layer: it also counts what authentication turns away.
    app.add_middleware(observability_routes.RequestMetrics, observability=obs)
    app.add_middleware(SizeLimit)  # outermost: oversized requests are refused before any work is done
    return app
