"""``kubectl get --raw PATH`` against a running adapter, as a user reads the metrics APIs."""

from __future__ import annotations

import subprocess

from tests.support.binaries import require_binary


def kubectl_raw(url: str, home: str, path: str) -> subprocess.CompletedProcess[str]:
    """Run the real kubectl against ``url``. HOME in a temp dir keeps ~/.kube/cache untouched
    (test-infrastructure.md); kubectl from .tools/bin (a current one) when installed, else PATH's."""
    return subprocess.run(
        [require_binary("kubectl"), f"--server={url}", "get", "--raw", path],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": home, "PATH": "/usr/bin:/bin:/usr/local/bin"},
    )
