"""The API groups this server serves: their names, versions and URL prefixes, defined here once.

``custom.metrics.k8s.io`` is served in v1beta2 and v1beta1 (two renderings of the same values; discovery lists
v1beta2 first, as preferred, like kubernetes-sigs/custom-metrics-apiserver), ``external.metrics.k8s.io`` in
v1beta1, its only version (kubernetes/metrics ``pkg/apis/external_metrics``).
"""

from __future__ import annotations

GROUP = "custom.metrics.k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # preferred first
PREFIX = f"/apis/{GROUP}"

EXTERNAL_GROUP = "external.metrics.k8s.io"
EXTERNAL_VERSION = "v1beta1"
EXTERNAL_PREFIX = f"/apis/{EXTERNAL_GROUP}"
