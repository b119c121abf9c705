"""The job config refuses unknown and invalid fields, naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from instances.runtime.config import ConfigError, JobConfig, load_config

MINIMAL = {"model": "tiny", "data": ["/data/shards"], "checkpoint_dir": "/ckpt", "max_steps": 10}


def test_it_builds_from_a_minimal_config_with_defaults() -> None:
    cfg = JobConfig.from_dict(MINIMAL)
    assert cfg.engine == "fsdp"
    assert cfg.checkpoint_every_minutes == 30.0
    assert cfg.resume_step == -1
    assert JobConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"lerning_rate": 0.1}, "lerning_rate"),
        ({"lr": "fast"}, "lr"),
        ({"lr": 0}, "lr"),
        ({"seq_len": 0}, "seq_len"),
        ({"micro_batch": 2.5}, "micro_batch"),
        ({"max_steps": True}, "max_steps"),
        ({"max_steps": 0}, "max_steps"),
        ({"engine": "megatron"}, "engine"),
        ({"model": "13b"}, "model"),
        ({"data": "/one/folder"}, "data"),
        ({"keep_last": 0}, "keep_last"),
        ({"mixed_precision": "fp8"}, "mixed_precision"),
        ({"callback_url": "ftp://portal"}, "callback_url"),
        ({"callback_url": "http://portal"}, "job_token"),
        ({"resume_step": -2}, "resume_step"),
        ({"async_save": "yes"}, "async_save"),
        ({"engine": "deepspeed", "checkpoint_dir": "s3://bucket/ckpt"}, "checkpoint_dir"),
    ],
)
def test_it_refuses_an_invalid_field_naming_it(patch: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        JobConfig.from_dict({**MINIMAL, **patch})
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_it_names_a_missing_required_field() -> None:
    raw = dict(MINIMAL)
    del raw["checkpoint_dir"]
    with pytest.raises(ConfigError) as info:
        JobConfig.from_dict(raw)
    assert info.value.field == "checkpoint_dir"


def test_it_reads_a_json_file_and_reports_bad_json(tmp_path: Path) -> None:
    good = tmp_path / "job.json"
    good.write_text(json.dumps({**MINIMAL, "checkpoint_every_steps": 5, "lr": 1}))
    cfg = load_config(good)
    assert (cfg.checkpoint_every_steps, cfg.lr) == (5, 1.0)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(bad)


def test_the_cli_exits_64_on_an_invalid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from instances.runtime.__main__ import main
    from instances.runtime.exitcodes import EXIT_CONFIG_ERROR

    path = tmp_path / "job.json"
    path.write_text(json.dumps({**MINIMAL, "bogus": 1}))
    assert main(["--config", str(path)]) == EXIT_CONFIG_ERROR
    assert "bogus: unknown field" in capsys.readouterr().err
