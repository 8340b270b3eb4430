"""The one rule for reaching the Kubernetes API: in-cluster in a pod unless a kubeconfig is named, else a kubeconfig.

This is client-go's ``clientcmd.BuildConfigFromFlags`` rule (kubernetes/client-go
``tools/clientcmd/client_config.go``): with no kubeconfig path given, a process running in a pod
(``KUBERNETES_SERVICE_HOST`` set) uses its service account; an explicit kubeconfig always wins. Otherwise the
kubeconfig file (``None``: ``$KUBECONFIG`` or ``~/.kube/config``) and its current (or the named) context.
Used by the pod source (``pods/kubernetes.py``) and the TokenReview/SubjectAccessReview client (``auth/kubeapi.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import cast

import kubernetes.client
import kubernetes.config


def api_client(kubeconfig: str | None = None, context: str | None = None) -> kubernetes.client.ApiClient:
    """A new ``ApiClient``; raises the Kubernetes client's ``ConfigException`` if neither way is configured.

    Refreshed credentials are never written back into the user's kubeconfig (``persist_config=False``)."""
    configuration = kubernetes.client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        load_incluster = cast(Callable[..., None], kubernetes.config.load_incluster_config)
        load_incluster(client_configuration=configuration)
    else:
        load_kube = cast(Callable[..., None], kubernetes.config.load_kube_config)
        load_kube(config_file=kubeconfig, context=context, client_configuration=configuration, persist_config=False)
    return kubernetes.client.ApiClient(configuration)
