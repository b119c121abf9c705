"""meta_init: an FSDP2 preset built on the meta device, sharded, then given storage and initialised."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runtime_support import REPO, free_port, losses, read_events

from instances.runtime.config import ConfigError, JobConfig


def test_meta_init_needs_fsdp_and_a_preset(base_config: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="meta_init: needs engine fsdp and a preset model"):
        JobConfig.from_dict({**base_config, "checkpoint_dir": str(tmp_path), "meta_init": True, "engine": "ddp"})


@pytest.mark.slow
def test_a_meta_initialised_model_trains_from_a_random_init_and_resumes(
    base_config: dict[str, Any], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    cfg = {**base_config, "engine": "fsdp", "meta_init": True, "max_steps": 4, "checkpoint_every_steps": 2,
           "checkpoint_dir": str(tmp_path / "ckpt"), "workdir": str(work)}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "RANK": "0", "LOCAL_RANK": "0",
           "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}  # fmt: skip
    for max_steps in (4, 6):  # the second run resumes from step 4
        path = tmp_path / f"job-{max_steps}.json"
        path.write_text(json.dumps({**cfg, "max_steps": max_steps}))
        proc = subprocess.run([sys.executable, "-m", "instances.runtime", "--config", str(path)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
    got = losses(work)
    assert sorted(got) == [1, 2, 3, 4, 5, 6]
    assert abs(got[1] - math.log(1024)) < 0.5  # a fresh normal(0, 0.02) init predicts ~uniformly
    assert got[6] < got[1]
    assert [e["step"] for e in read_events(work) if e["type"] == "started"] == [0, 4]
