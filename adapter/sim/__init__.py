"""A simulated LLM serving fleet: the real request trace (``trace``), a GPU/vLLM pod model (``fleet``)."""
