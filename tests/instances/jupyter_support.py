"""Helpers of the JupyterLab tests (real local backend)."""

from __future__ import annotations

import sys
import time
from typing import Any

SLEEPING = [sys.executable, "-c", "import time; time.sleep(600)"]


def running_with_jupyter(
    alice: Any, alice_org: Any, *, timeout_s: float = 90, command: list[str] = SLEEPING, name: str = "notebook"
) -> Any:
    """Launch an interactive instance (``command``: a sleeping one by default; ``[]``: none) for alice and wait
    until its Jupyter server answers (reconciling meanwhile). Returns the instance."""
    from instances_support import fund

    from instances.interactive.jupyter import jupyter_state
    from instances.models import Instance
    from instances.services import LaunchSpec, instance_launch, instances_reconcile

    fund(alice_org, 10)
    instances_reconcile()  # a fresh install: the first reconcile takes the local node from the backend
    inst = instance_launch(
        organization=alice_org,
        user=alice,
        spec=LaunchSpec(
            name=name,
            kind="interactive",
            gpu_type="cpu-local",
            gpu_count=1,
            command=list(command),
        ),
    )
    deadline = time.monotonic() + timeout_s
    while True:
        instances_reconcile()
        inst = Instance.objects.get(pk=inst.pk)
        if inst.status == "running" and jupyter_state(inst) == "ready":
            return inst
        assert inst.status in ("scheduling", "provisioning", "running"), inst.status_reason
        assert time.monotonic() < deadline, "Jupyter did not answer"
        time.sleep(0.2)
