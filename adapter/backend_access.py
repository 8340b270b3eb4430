"""What the adapter needs to reach its backend: the flavour and the connection options (TLS, credentials, headers,
limits). Plain data, no I/O: the settings hold it; ``query/backend.py`` turns it into an HTTP client."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

# What answers at --prometheus-url; decides the query parameters sent and the tenant's meaning.
Flavour = Literal["prometheus", "victoriametrics", "victoriametrics-cluster", "thanos", "mimir"]
FLAVOURS: tuple[str, ...] = get_args(Flavour)

# 64 MiB. An instant query over a fleet of 1,000 pods x 8 GPUs is 8,000 series of ~220 bytes = ~1.8 MB
# (measured on the catalog's DCGM series); kube-state-metrics pod membership for 20,000 pods is ~10 MB. 64 MiB
# leaves headroom above both and stops a runaway selector (the red team's 210 MB answer) well before it
# costs the process its memory.
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
# Series per answer. The catalog's largest legitimate answers: one namespace of 1,000 pods x 8 GPUs is 8,000
# series; kube-state-metrics pod membership of a 20,000-pod namespace is 20,000. 50,000 is 2.5x the larger; a
# pod that exposes 150,000 series differing in one label (the red team's) makes its own namespace's answer fail
# at the 50,001st series, before it is buffered or parsed, instead of ~10x its size in Python objects.
DEFAULT_MAX_ANSWER_SERIES = 50_000
# Answer bytes held at once (read, or being parsed), all queries together: one answer at the byte bound.
# Parsed JSON costs ~10x its size in Python objects (benchmarks/big_answer.py), so this caps that cost near
# 640 MiB whatever number of big answers arrive together (8 concurrent 17 MB answers peaked at 1.5 GiB).
DEFAULT_MAX_PARSE_BYTES = DEFAULT_MAX_ANSWER_BYTES


@dataclass(frozen=True)
class BackendAccess:
    """TLS, credentials, headers and limits for the backend connection (all optional: the default is plain,
    unauthenticated HTTP(S) with the system's CAs, which is what the adapter did before these options)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token_file: str | None = None
    basic_auth_file: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    tenant: str | None = None
    insecure_skip_verify: bool = False
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    max_answer_series: int = DEFAULT_MAX_ANSWER_SERIES
    max_parse_bytes: int = DEFAULT_MAX_PARSE_BYTES

    def describe(self) -> str:
        """One log-safe line: which options are in use, never a secret (header values are left out)."""
        parts = []
        for label, value in (
            ("ca", self.ca_file),
            ("client-cert", self.cert_file),
            ("token-file", self.token_file),
            ("basic-auth-file", self.basic_auth_file),
            ("tenant", self.tenant),
        ):
            if value:
                parts.append(f"{label}={value}")
        if self.headers:
            parts.append("headers=" + ",".join(name for name, _ in self.headers))
        if self.insecure_skip_verify:
            parts.append("INSECURE-SKIP-VERIFY")
        parts.append(f"max-answer-bytes={self.max_answer_bytes}")
        parts.append(f"max-answer-series={self.max_answer_series}")
        parts.append(f"max-parse-bytes={self.max_parse_bytes}")
        return " ".join(parts)
