"""``python -m adapter calibrate``: find a Deployment's knee and propose the composite's targets.

``knee`` is pure (binned per-pod history in, a ``Calibration`` out), ``history`` reads the history from
Prometheus/VictoriaMetrics or from an offline simulated fleet, ``report`` writes JSON, a catalog snippet and
a PNG. docs/calibrate.md explains the design.
"""
