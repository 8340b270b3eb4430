"""llm-hpa-adapter: a custom.metrics.k8s.io server for LLM inference on GPUs.

Two requests, top down. Each step calls the next and gets its answer back; no step calls into a module that is
still waiting below it on the way down (the value store's loader is ``provider/reads.py``, which only talks to
the backend).

``GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/llm/pods/*/llm_composite_load_boosted?labelSelector=app=vllm``

1. ``connection.py`` reads the request (bounded heads and bodies); ``routes/limits.py``,
   ``routes/observability.py`` (request metrics) and, when serving securely, ``auth/middleware.py`` wrap it.
2. ``routes/custom_metrics.py``: the route shape gives (version, namespace, resource, name, metric); method and
   ``Accept`` are checked.
3. ``api/storage.py``: the version, the names and both selectors (``api/params.py``), the resource's canonical
   name; a name of ``*`` becomes ``get_metric_by_selector`` on the provider (``provider/base.py``, the seam;
   ``provider/dispatch.py`` in front when prometheus-adapter's rules are served too).
4. ``provider/prometheus.py``: the metric's ``Served`` record (``provider/served.py``, resolved when the catalog
   loaded), the pods of ``labelSelector`` (``pods/``), the workload's boost (``forecast_service.ForecastService``), then
5. ``provider/values.py``: ``Values.read`` of the base composite from the store: ``store.py`` answers each term
   from memory (a first request for a key runs its loader, ``provider/reads.py``: ``query/promql.py`` renders,
   ``query/client.py`` queries, ``aggregate.py`` reduces by pod). The read picks the request's pods and takes the
   composite fused for the namespace (or fuses these pods with ``aggregate.fuse``, and starts the namespace's
   fusion in the background).
6. Back in ``provider/prometheus.py``: each pod's value at its boosted load (``aggregate.at_load``), as
   ``PodSamples`` (``provider/base.py``); ``api/wire.py`` writes the MetricValueList, ``routes/http.py`` sends it.

``GET /apis/external.metrics.k8s.io/v1beta1/namespaces/llm/inference_queue_depth?labelSelector=model_name=llama``

1. The same connection and middleware; ``routes/external_metrics.py`` checks method and ``Accept``.
2. ``api/external.py``: the path, the namespace and the selector (``api/params.py``, as for custom metrics), then
   the external provider built by ``app.py`` (``provider/external.py``; ``provider/dispatch.py`` in front with
   prometheus-adapter's rules).
3. ``provider/external.py``: the ``Served`` record; a catalog metric or composite is read by ``Values.read``
   from the store as in step 5 above (the key: namespace, metric, ``labelSelector``) and combined by the
   catalog's ``objects`` rule (``aggregate.combine``); a forecast metric is one ``get_metric_by_name`` per
   Deployment on ``provider/prometheus.py``.
4. ``api/external.py`` writes the ExternalMetricValueList, ``routes/http.py`` sends it.

With prometheus-adapter's rules served, ``provider/dispatch.py`` sends a metric the catalog does not serve to
``provider/promadapter.py`` (the seam for the rules: the discovered rule, the objects of ``labelSelector``), which
reads through ``provider/rules_values.py``: the rules' value store, whose loader ``RulesReads`` only renders the
rule's query (``promadapter/metrics_query.py``) and runs it; a rule not answered from the store is one query.

The stores' own refresh loops run the same loaders once per key per interval, off the request path.
"""

__version__ = "0.1.0"
