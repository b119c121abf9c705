"""Async saves stage the state in the background: the checkpoint holds the tensors of the step it names,
even though training goes on (and the optimizer changes those tensors) while it is copied and written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runtime_support import REPO, free_port

# Runs in a fresh process (world size 1, gloo): one step, a snapshot of the tensors, an async save whose
# background copy starts late, two more steps (the optimizer changes every tensor), then the checkpoint is
# loaded and compared with the snapshot.
SCRIPT = r"""
import json, sys, time
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.staging import DefaultStager
from torch.distributed.checkpoint.state_dict import get_state_dict
from instances.runtime.config import JobConfig
from instances.runtime.train import Trainer

def flat(sd, prefix=""):
    out = {}
    for k, v in sd.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        elif isinstance(v, torch.Tensor):
            out[f"{prefix}{k}"] = (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().clone()
    return out

staged = DefaultStager._stage
def late_stage(self, state_dict, **kwargs):  # a slow copy: without the fence the optimizer step would win the race
    time.sleep(1.0)
    return staged(self, state_dict, **kwargs)
DefaultStager._stage = late_stage

tr = Trainer(JobConfig.from_dict(json.loads(sys.argv[1])))
tr.build()
tr.train_step(); tr.step = 1
before = flat(tr._model_optim_state())
tr.save(asynchronous=True)
stager = type(tr._stager).__name__
for _ in range(2):
    tr.train_step(); tr.step += 1
tr.wait_for_save()
after = flat(tr._model_optim_state())
state = tr._model_optim_state()
dcp.load(state, checkpoint_id=tr.store.step_path(1), process_group=tr.ckpt_pg)
loaded = flat(state)
manifest = json.loads(open(tr.store.step_path(1) + "/manifest.json").read())
print(json.dumps({
    "stager": stager,
    "keys": sorted(before) == sorted(loaded),
    "equal_to_snapshot": [k for k in before if not torch.equal(before[k], loaded[k])],
    "changed_by_training": sum(not torch.equal(before[k], after[k]) for k in before),
    "tensors": len(before),
    "step": manifest["step"],
    "hashed": all("sha256" in f for f in manifest["files"].values()),
}))
tr.close()
"""


@pytest.mark.parametrize("engine", ["ddp", "fsdp"])
def test_an_async_save_holds_the_tensors_of_its_step_while_training_goes_on(
    engine: str, base_config: dict[str, Any], tmp_path: Path
) -> None:
    cfg = {**base_config, "engine": engine, "checkpoint_dir": str(tmp_path / "ckpt"), "workdir": str(tmp_path / "w")}
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "RANK": "0", "LOCAL_RANK": "0",
           "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cfg)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["stager"] == "DefaultStager"  # CPU: DCP's stager copying in its background thread
    assert got["keys"] is True
    assert got["equal_to_snapshot"] == []  # every tensor as it was at step 1, bit for bit
    assert got["changed_by_training"] == got["tensors"]  # ... although the two later steps changed them all
    assert (got["step"], got["hashed"]) == (1, True)
