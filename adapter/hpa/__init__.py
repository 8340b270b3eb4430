"""A faithful, pure model of the Kubernetes HPA v2 controller (kubernetes/kubernetes
``pkg/controller/podautoscaler``): parse an HPA (``spec``), compute per-metric proposals
(``replicas``, ``proposals``), normalize them (``behavior``) and run reconciles (``controller``).
"""
