"""llm-hpa-adapter: a custom.metrics.k8s.io server for LLM inference on GPUs."""

__version__ = "0.1.0"
