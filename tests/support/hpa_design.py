"""The HPA the project's design ships for a vLLM Deployment (ARCHITECTURE.md / the task brief), with the SLO guard
beside the boosted composite (docs/results.md "The SLO guard")."""

from __future__ import annotations

DESIGN_HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: vllm
  namespace: llm
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: vllm
  minReplicas: 1
  maxReplicas: 40
  metrics:
    - type: Pods
      pods:
        metric:
          name: llm_composite_load_boosted
        target:
          type: AverageValue
          averageValue: "1"
    - type: Pods
      pods:
        metric:
          name: inference_ttft_p99_guard_seconds_boosted
        target:
          type: AverageValue
          averageValue: "1.8"
    - type: Pods
      pods:
        metric:
          name: inference_itl_p99_guard_seconds_boosted
        target:
          type: AverageValue
          averageValue: "0.09"
  behavior:
    scaleUp:
      tolerance: 0.02
      stabilizationWindowSeconds: 60
      policies:
        - type: Pods
          value: 2
          periodSeconds: 30
    scaleDown:
      stabilizationWindowSeconds: 300
      policies:
        - type: Percent
          value: 20
          periodSeconds: 60
"""
