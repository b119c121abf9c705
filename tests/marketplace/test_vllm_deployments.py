"""Published models on Kubernetes are served by vLLM: a Deployment of the official vLLM OpenAI-compatible server
image on a GPU, the export mounted read-only, probes on vLLM's own ``/health``; the portal proxies it.

The cluster is the stand-in (``tests/instances/k8s_standin.py``: scheduler, kubelet, Deployment controller, strict
schema validation of every object). The stand-in runs no containers, so the vLLM pod's HTTP endpoint is played by
the product's local model server, which speaks vLLM's OpenAI API (``/v1/completions``, ``/health``, server-sent
events, usage); the Service URL points there. No GPU is lent to these tests and vLLM is not run: a real cluster adds
the image pull, the NVIDIA device plugin, the probes against vLLM itself, cluster DNS, and vLLM's own batching.
The export is checked loadable by ``transformers`` exactly as vLLM loads a model folder (``AutoConfig``,
``AutoTokenizer``, the safetensors weights, ``generation_config.json``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "instances"))
from k8s_standin import StandinCluster

PROMPT = "第一条 为了规范合同行为"


def vllm_manifests(**kw: Any) -> list[dict[str, Any]]:
    from instances.serving import kubernetes_manifests

    return kubernetes_manifests(
        name="app-legal-drafting-v1",
        namespace="apps",
        image="",
        model_claim="app-models",
        model_path="legal-drafting/v1",
        gpus=kw.pop("gpus", 1),
        engine="vllm",
        **kw,
    )


@pytest.mark.parametrize("version", ["1.33.0", kubernetes_validate.latest_version()])
def test_the_vllm_deployment_and_service_validate_strictly_and_name_the_official_image(version: str) -> None:
    from instances.serving.kubernetes import VLLM_IMAGE

    manifests = vllm_manifests()
    for manifest in manifests:
        assert kubernetes_validate.validate(manifest, version, strict=True) == version[:4]
    pod = manifests[0]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == VLLM_IMAGE and VLLM_IMAGE.startswith("vllm/vllm-openai:v")
    assert container["command"] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert container["args"] == [
        "--model", "/models/legal-drafting/v1", "--served-model-name", "app-legal-drafting-v1",
        "--host", "0.0.0.0", "--port", "8000",  # noqa: S104 - the pod listens on its own address
    ]  # fmt: skip
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": 8000}
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] == 600
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in container["env"]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    assert {"name": "models", "persistentVolumeClaim": {"claimName": "app-models", "readOnly": True}} in pod["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    assert manifests[1]["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 8000}]


def test_vllm_without_a_gpu_is_refused_before_any_call() -> None:
    from instances.serving import DeploymentError, KubernetesDeployments

    with pytest.raises(ValueError, match="vLLM serves on GPUs"):
        vllm_manifests(gpus=0)
    with pytest.raises(DeploymentError, match="the vLLM engine serves on GPUs"):
        KubernetesDeployments(image="", model_claim="c", model_root="/tmp", engine="vllm", gpus=0)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_model_app_on_kubernetes_runs_vllm_on_a_gpu_node_and_the_portal_proxies_it(
    live_server: Any, tiny_model: Any, tmp_path: Path, alice: Any, alice_org: Any, charlie: Any
) -> None:
    import openai
    from test_openai_api import FUNDS, assert_charged, balance, client_for, model_app, price

    from billing.services import wallet_top_up
    from instances.serving import DeploymentError, KubernetesDeployments, LocalDeployments
    from instances.serving.kubernetes import VLLM_IMAGE
    from portal.marketplace.models import AppCall

    model_root = tmp_path / "apps"
    export = model_root / "legal-drafting" / "v1"
    shutil.copytree(tiny_model["export"], export)  # the claim's folder, as the build task writes it
    name = "app-legal-drafting-v1"
    pod_server = LocalDeployments(tmp_path / "pod")  # plays the vLLM container's HTTP endpoint
    endpoint = pod_server.start(name=name, model_dir=export)
    try:
        with StandinCluster() as cluster:
            cluster.add_node("cpu-only", gpus=0)
            cluster.add_node("gpu-a", gpus=1)

            def backend(**kw: Any) -> KubernetesDeployments:
                return KubernetesDeployments(
                    image="", model_claim="app-models", model_root=model_root, namespace="apps", engine="vllm",
                    gpus=1, api_client=cluster.api_client(), poll_s=0.01, url_template=endpoint["url"], **kw,
                )  # fmt: skip

            deployment = backend().start(name=name, model_dir=export)
            assert (deployment["engine"], deployment["served_model"], deployment["image"]) == ("vllm", name, VLLM_IMAGE)
            assert deployment["url"] == endpoint["url"] and deployment["model_path"] == "legal-drafting/v1"
            (pod,) = cluster.pods("apps")
            assert (pod["spec"]["nodeName"], pod["status"]["phase"]) == ("gpu-a", "Running")
            assert pod["spec"]["containers"][0]["image"] == VLLM_IMAGE
            assert pod["spec"]["containers"][0]["args"][:2] == ["--model", "/models/legal-drafting/v1"]
            assert backend().alive(deployment)

            caller = charlie.organizations.get()
            wallet_top_up(organization=caller, amount_micros=FUNDS, idempotency_key="vllm-caller")
            app = model_app(alice, alice_org, deployment, export)
            before = {"caller": balance(caller), "alice": balance(alice_org)}
            oa = client_for(live_server, charlie, caller)
            chat = oa.chat.completions.create(
                model=app.slug, messages=[{"role": "user", "content": "合同"}], max_tokens=6, temperature=0
            )
            assert chat.choices[0].message.content and chat.usage is not None
            call = AppCall.objects.get()
            assert_charged(
                call, caller, alice_org, before, price(chat.usage.prompt_tokens, chat.usage.completion_tokens)
            )

            # the GPU is taken: a second model's pod cannot be scheduled, and the start says why
            with pytest.raises(DeploymentError) as refused:
                backend(ready_timeout_s=0.3).start(name="app-other-v1", model_dir=export)
            assert "Unschedulable" in str(refused.value) and "nvidia.com/gpu" in str(refused.value)
            assert [p["spec"].get("nodeName") for p in cluster.pods("apps")] == ["gpu-a"]

            assert backend().stop(deployment, grace_s=0) is True
            assert cluster.pods("apps") == []
            pod_server.stop(endpoint)  # the model's pod is gone: 502, nothing charged
            with pytest.raises(openai.InternalServerError):
                oa.completions.create(model=app.slug, prompt=PROMPT, max_tokens=4)
            assert AppCall.objects.filter(status="succeeded").count() == 1
    finally:
        pod_server.stop(endpoint)


def test_the_export_loads_in_transformers_as_vllm_loads_it_and_generates_what_the_local_server_generates(
    tiny_model: Any,
) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from instances.serving.engine import SamplingParams
    from instances.serving.prompting import chat_messages, load_model_text
    from instances.serving.server import Model

    export = tiny_model["export"]
    config = AutoConfig.from_pretrained(export, local_files_only=True)
    assert config.architectures == ["LlamaForCausalLM"] and config.model_type == "llama"  # a vLLM architecture
    assert (export / "model.safetensors").is_file() and not list(export.glob("*.bin"))
    tokenizer = AutoTokenizer.from_pretrained(export, local_files_only=True)
    text = load_model_text(export)
    assert tokenizer.is_fast and tokenizer.eos_token == "<eos>" and tokenizer.eos_token_id == text.eos_id
    assert tokenizer(PROMPT)["input_ids"] == text.encode(PROMPT)
    messages = [{"role": "system", "content": "你是法律助手。"}, {"role": "user", "content": "合同是什么？"}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert (
        rendered
        == text.render_chat(chat_messages(messages))
        == "system: 你是法律助手。\nuser: 合同是什么？\nassistant:"
    )
    generation = GenerationConfig.from_pretrained(export)
    assert generation.repetition_penalty == 1.3 and generation.eos_token_id == text.eos_id

    model = AutoModelForCausalLM.from_pretrained(export, local_files_only=True, dtype=torch.float32).eval()
    ids = torch.tensor([text.encode(PROMPT)])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False,
                             generation_config=generation)  # fmt: skip
    expected = out[0, ids.shape[1] :].tolist()
    served = Model(export)
    try:
        request = served.engine.submit(text.encode(PROMPT), SamplingParams(max_tokens=10, repetition_penalty=1.3))
        while request.events.get(timeout=30).finish_reason is None:
            pass
    finally:
        served.engine.stop()
    assert request.generated == expected[: len(request.generated)] and len(request.generated) >= 1
