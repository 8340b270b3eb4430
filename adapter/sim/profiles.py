"""Named vLLM engine profiles: a model on a GPU node, with the step-cost model fitted to public figures.

An ``EngineProfile`` says what one vLLM pod is (model architecture, GPUs, scheduler limits) and what one engine
step costs: ``step_s = overhead_s + token_s x tokens + kv_read_s x context`` (``adapter.sim.engine``): a fixed
part per step (weights read from HBM, kernel launches, the scheduler's CPU time), a part per token the step
processes (the matmuls; prefill chunks and decode tokens alike) and a part per token of context the decoding
sequences attend to (reading their KV cache). That is the standard linear roofline-style fit of a transformer
step; ``tests/sim/test_profiles.py`` checks each profile against the published figures it was fitted to.

Every number carries its source beside it. "Published" numbers were read off a public benchmark; "derived"
numbers follow from the model's architecture or the GPU's data sheet by arithmetic shown next to them;
"fitted" numbers were chosen so the step-level model reproduces the published figures (docs/simulation.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from adapter.sim.config import named

GIB = float(1 << 30)
BLOCK_TOKENS = 16  # vLLM's default KV block size on CUDA (--block-size 16)
H100_SXM_GIB = 79.65  # NVIDIA H100 SXM5 80 GB: 81,559 MiB as nvidia-smi / DCGM report it (FleetConfig's GpuModel)
H100_HBM_BYTES_S = 3.35e12  # H100 SXM5 HBM3 bandwidth, NVIDIA H100 data sheet (3.35 TB/s)


@dataclass(frozen=True)
class EngineProfile:
    """One vLLM engine (a pod) serving one model on ``gpus`` GPUs with tensor parallelism.

    Architecture fields give the KV bytes per token (``layers x kv_heads x head_dim x 2 (K and V) x
    kv_dtype_bytes``); memory fields give the KV cache's size in blocks of ``BLOCK_TOKENS`` tokens (vLLM sizes it
    as ``gpu_memory_utilization x GPU memory - weights - activation reserve``). The three step costs are
    seconds (module docstring).
    """

    name: str
    model_name: str
    gpus: int
    layers: int
    kv_heads: int
    head_dim: int
    weights_gib: float
    overhead_s: float
    token_s: float
    kv_read_s: float
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    gpu_gib: float = H100_SXM_GIB
    gpu_memory_utilization: float = 0.9  # vLLM's --gpu-memory-utilization default
    activation_gib_per_gpu: float = 2.5  # derived: activations + CUDA graphs vLLM profiles before sizing the KV cache
    kv_dtype_bytes: int = 2  # bf16 KV cache (--kv-cache-dtype auto with a bf16 model)
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("gpus", "layers", "kv_heads", "head_dim", "max_num_seqs", "max_num_batched_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{self.name}: {name} must be at least 1")
        for name in ("overhead_s", "token_s", "kv_read_s", "weights_gib"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{self.name}: {name} must be positive")
        if self.kv_cache_blocks < 1:
            raise ValueError(f"{self.name}: the weights leave no GPU memory for the KV cache")

    @property
    def kv_bytes_per_token(self) -> int:
        """KV cache bytes one token of context holds, over all GPUs of the pod."""
        return self.layers * self.kv_heads * self.head_dim * 2 * self.kv_dtype_bytes

    @property
    def kv_cache_blocks(self) -> int:
        """KV blocks the engine allocates at start-up (what vLLM logs as ``# GPU blocks``)."""
        free = self.gpus * (self.gpu_gib * self.gpu_memory_utilization - self.activation_gib_per_gpu)
        free -= self.weights_gib
        return max(0, math.floor(free * GIB / (self.kv_bytes_per_token * BLOCK_TOKENS)))

    @property
    def kv_cache_tokens(self) -> int:
        """Tokens of context the KV cache holds (``kv_cache_blocks x BLOCK_TOKENS``)."""
        return self.kv_cache_blocks * BLOCK_TOKENS

    def step_s(self, tokens: float, context: float) -> float:
        """Time of one engine step processing ``tokens`` tokens whose decoding sequences hold ``context`` tokens."""
        return self.overhead_s + self.token_s * tokens + self.kv_read_s * context


# Llama 3 8B / 3.1 8B (same architecture): 32 layers, 8 KV heads of 128 (GQA), 8.03 B parameters
# (meta-llama/Llama-3.1-8B config.json: num_hidden_layers 32, num_key_value_heads 8, hidden 4096 / 32 heads).
LLAMA3_8B_H100 = EngineProfile(
    name="llama3-8b-h100",
    model_name="meta-llama/Llama-3.1-8B-Instruct",
    gpus=1,
    layers=32,
    kv_heads=8,
    head_dim=128,
    weights_gib=14.96,  # derived: 8.03e9 parameters x 2 bytes (bf16) = 16.06 GB
    # fitted: vLLM v0.6.0 blog (blog.vllm.ai/2024/09/05/perf-update.html, appendix figure "H100_8B"): ShareGPT
    # (202 in / 179 out tokens on average), mean TPOT ~8 ms at 2 QPS and ~13.5 ms at 32 QPS, 37 req/s at QPS inf;
    # prefill-heavy (462 in / 16 out) 59 req/s. Lambda's vllm-benchmark (results/prompt_10/1xH100-80GB-SXM/
    # Meta-Llama-3-8B-Instruct_tp1_len2048.json) shows ~7.2 ms per decode step at batch 10.
    # checked, not fitted: the same repository's mean TTFT of bursts of 10 to 320 ShareGPT prompts and the output
    # tokens/s of 5000 (benchmark_v0.md, v0.6.0): tests/sim/lambda_vllm_benchmark.json, docs/simulation.md.
    overhead_s=7.2e-3,
    token_s=30e-6,
    kv_read_s=131_072 / H100_HBM_BYTES_S,  # derived: 128 KiB of KV per token of context / 3.35 TB/s = 39 ns
    max_num_seqs=256,  # vLLM v0.6 default (the blog's runs); V1 on H100 defaults to 1024
    max_num_batched_tokens=8192,  # vLLM V1 default for the OpenAI server on >= 70 GiB GPUs (EngineArgs)
    max_model_len=8192,
    source="vLLM v0.6.0 performance update (Sept 2024), Llama 3 8B on 1xH100, ShareGPT / prefill- / decode-heavy",
)

# Llama 3 70B / 3.1 70B: 80 layers, 8 KV heads of 128, 70.6 B parameters (meta-llama/Llama-3.1-70B config.json).
LLAMA3_70B_H100_TP4 = EngineProfile(
    name="llama3-70b-h100-tp4",
    model_name="meta-llama/Llama-3.1-70B-Instruct",
    gpus=4,
    layers=80,
    kv_heads=8,
    head_dim=128,
    weights_gib=131.5,  # derived: 70.6e9 parameters x 2 bytes (bf16) = 141.2 GB, split over 4 GPUs
    # fitted: vLLM v0.6.0 blog, appendix figure "H100_70B" (4xH100): ShareGPT mean TPOT ~22 ms at 2 QPS, ~40 ms
    # at 16 QPS, 17.3 req/s at QPS inf; decode-heavy (462 in / 256 out) 15.4 req/s; prefill-heavy 25 req/s.
    # Lambda's vllm-benchmark (results/prompt_10/4xH100-80GB-SXM/Meta-Llama-3-70B-Instruct_tp4_len2048.json)
    # shows ~17.5 ms per decode step at batch 10.
    # checked, not fitted: TTFT of bursts and 5000-prompt output tokens/s from the same repository, as for 8B.
    overhead_s=19.0e-3,
    token_s=78e-6,
    kv_read_s=327_680 / (4 * H100_HBM_BYTES_S),  # derived: 320 KiB per token over 4 x 3.35 TB/s = 24 ns
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    max_model_len=8192,
    source="vLLM v0.6.0 performance update (Sept 2024), Llama 3 70B on 4xH100, ShareGPT / prefill- / decode-heavy",
)

PROFILES: dict[str, EngineProfile] = {p.name: p for p in (LLAMA3_8B_H100, LLAMA3_70B_H100_TP4)}
DEFAULT_PROFILE = LLAMA3_8B_H100.name


def profile(name: str) -> EngineProfile:
    """The named profile (``ValueError`` listing the known names otherwise)."""
    return named(PROFILES, name, "engine profile")
