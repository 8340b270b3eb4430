"""Whether this replica can reach its backend: the state ``/readyz`` reports.

The rule (docs/operations.md says it for operators): a replica is *unready* once no HTTP answer (of any status)
has come back from the backend for ``unready_after_s`` seconds while queries or probes were failing (refused,
reset, timed out, no pooled connection); it is *ready* again at the first answer. An idle replica, and an unready
one (which Kubernetes stops sending requests to), learns the truth from a cheap probe that ``/readyz`` starts in
the background at most once per ``probe_interval_s``: ``/readyz`` itself never waits on the backend, so it
answers within the kubelet's probe timeout whatever the backend does.

Why this rule: a replica whose own path to the backend is broken (its node's network, its DNS, its connection
pool) is taken out of the Service while a healthy one serves. A backend that answers with errors (HTTP 5xx) is
reachable: every replica sees the same errors, so none goes unready for it. When the backend is down for every
replica, every replica goes unready after ``unready_after_s``: the APIService shows Available=False, which is
the truth, and the HPA holds its scale exactly as it does on a 503. Transitions from ready to unready take
``unready_after_s`` of uninterrupted failure, so a backend that fails intermittently cannot make the replicas
flap faster than once per ``unready_after_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Reachability:
    """The reachability state of one backend client; ``clock`` is monotonic seconds (injectable for tests)."""

    def __init__(
        self,
        *,
        unready_after_s: float = 30.0,
        probe_interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.unready_after_s = unready_after_s
        self.probe_interval_s = probe_interval_s
        self._clock = clock
        self._failing_since: float | None = None
        self._last_attempt: float | None = None
        self.last_answer: float | None = None

    def answered(self) -> None:
        """The backend sent an HTTP answer (any status)."""
        now = self._clock()
        self.last_answer = self._last_attempt = now
        self._failing_since = None

    def failed(self) -> None:
        """A query or probe got no HTTP answer (refused, reset, timed out, no connection from the pool)."""
        now = self._clock()
        self._last_attempt = now
        if self._failing_since is None:
            self._failing_since = now

    def ready(self) -> tuple[bool, str]:
        """(ready, why): unready only after ``unready_after_s`` of failures without an answer."""
        if self._failing_since is None:
            return True, "ok"
        down = self._clock() - self._failing_since
        if down < self.unready_after_s:
            return True, f"ok (no backend answer for {down:.0f}s; unready after {self.unready_after_s:g}s)"
        return False, f"this replica has had no answer from its metrics backend for {down:.0f}s"

    def probe_due(self) -> bool:
        """Whether nothing has told us anything for ``probe_interval_s`` (a probe would)."""
        return self._last_attempt is None or self._clock() - self._last_attempt >= self.probe_interval_s
