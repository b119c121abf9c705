"""Serving a model trained by the runtime: export, a local model server, deployments and ``generate``.

Four parts, none of which imports Django (the marketplace calls them from its services and tasks):

* ``export_checkpoint(checkpoint_dir, out_dir)`` turns a complete DCP checkpoint written by
  ``instances.runtime`` (``step-N/`` with ``.metadata``) into a Hugging Face folder: ``config.json`` +
  ``model.safetensors`` (``save_pretrained(safe_serialization=True)``), ``generation_config.json``, the
  training data's ``tokenizer.json`` and ``export.json`` (step, source, vocabulary, eos id). Only the model
  weights are read (the optimizer state stays on disk). The folder is written under a temporary name and
  renamed into place last, so ``out_dir`` either holds a whole export or does not exist.
* ``python -m instances.inference serve --model-dir D --port P`` — a small stdlib ``http.server`` serving
  ``GET /healthz`` and ``POST /generate`` (``{"text": str, "max_new_tokens": int}`` →
  ``{"output": <generated continuation>, "tokens": n}``, greedy decoding, one generation at a time).
* ``LocalDeployments`` starts that server as a process in its own session (like the local training backend:
  stopping signals the whole process group, so nothing is orphaned), records pid / port / URL in a JSON-ready
  deployment dict, is idempotent (a live deployment is returned as it is) and stops it.
  ``kubernetes_manifests`` builds the Deployment + Service for a cluster with the official client's models;
  ``KubernetesDeployments`` applies them (same interface as ``LocalDeployments``) and waits for a ready
  replica; ``get_deployments(name, **options)`` builds either, as ``instances.backends.get_backend`` does.
* ``generate(deployment=…, payload=…, timeout_s=…)`` POSTs a request to a deployment's URL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

EXPORT_INFO = "export.json"
TOKENIZER_FILE = "tokenizer.json"
EXPORT_FORMAT = "gpu-portal-export/1"
MAX_NEW_TOKENS = 256  # upper bound of one request's ``max_new_tokens``
DEFAULT_NEW_TOKENS = 32
MAX_BODY_BYTES = 1 << 20
SERVER_MODULE = "instances.inference"
PROJECT_ROOT = Path(__file__).resolve().parents[1]


class ExportError(RuntimeError):
    """The checkpoint cannot be exported (incomplete, not a runtime checkpoint, no tokenizer). Names the folder."""


# --- export ------------------------------------------------------------------------------------------------


def _read_runtime_state(reader: Any) -> dict[str, Any]:
    import pickle

    import torch.distributed.checkpoint as dcp

    holder: dict[str, Any] = {"runtime": b""}
    with warnings.catch_warnings():  # "torch.distributed is ... uninitialized": single-process load on purpose
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(holder, storage_reader=reader, no_dist=True)
    return pickle.loads(holder["runtime"])  # noqa: S301 - the runtime's own checkpoint


def _tokenizer_source(config: dict[str, Any], tokenizer_file: str | None) -> tuple[Path | None, int | None]:
    """(tokenizer.json, eos id) of the training data: the explicit file, the config's, or the first shard
    set's ``index.json`` ``tokenizer`` entry (relative to the shard folder)."""
    eos: int | None = None
    found: Path | None = Path(tokenizer_file) if tokenizer_file else None
    for folder in config.get("data", []):
        index = Path(folder) / "index.json"
        if not index.is_file():
            continue
        meta = json.loads(index.read_text(encoding="utf-8"))
        eos = int(meta["eos_id"]) if eos is None and "eos_id" in meta else eos
        if found is None and meta.get("tokenizer"):
            found = Path(folder) / meta["tokenizer"]
    if found is None and config.get("tokenizer"):
        found = Path(config["tokenizer"])
    return found, eos


def export_checkpoint(
    checkpoint_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    tokenizer_file: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Convert the complete DCP checkpoint in ``checkpoint_dir`` into a Hugging Face folder ``out_dir``.

    The model is rebuilt from the config stored in the checkpoint (preset name or base-model folder, with
    the vocabulary read from the checkpoint's own tensor shapes), its weights loaded with
    ``torch.distributed.checkpoint.load`` (no process group; FSDP/DDP shards of any world size are merged),
    then saved with ``save_pretrained(safe_serialization=True)`` in float32. ``tokenizer_file`` overrides the
    tokenizer found through the training data (see ``_tokenizer_source``). ``progress(percent)`` is called
    at 10, 40, 70, 90 and 100.

    Returns the ``export.json`` dict: ``format``, ``step``, ``source``, ``model``, ``vocab_size``,
    ``eos_id``, ``max_position_embeddings``, ``parameters``, ``bytes``. Idempotent: when ``out_dir``
    already holds an export, its ``export.json`` is returned and nothing is rewritten.
    Raises ``ExportError`` (incomplete or foreign checkpoint, no tokenizer) and ``OSError``.
    """
    src, out = Path(checkpoint_dir), Path(out_dir)
    report = progress or (lambda _p: None)
    if (out / EXPORT_INFO).is_file():
        report(100)
        return json.loads((out / EXPORT_INFO).read_text(encoding="utf-8"))
    if not (src / ".metadata").is_file():
        raise ExportError(f"checkpoint {src} is not complete (no .metadata): it cannot be exported")

    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader

    from instances.runtime.model import build_model

    reader = FileSystemReader(str(src))
    metadata = reader.read_metadata()
    embed = metadata.state_dict_metadata.get("model.model.embed_tokens.weight")
    if embed is None or not hasattr(embed, "size"):
        raise ExportError(f"checkpoint {src} holds no Llama model weights (engine deepspeed is not exportable)")
    try:
        runtime = _read_runtime_state(FileSystemReader(str(src)))
    except Exception as exc:  # a DCP folder that is not the runtime's
        raise ExportError(f"checkpoint {src} has no readable runtime state: {exc}") from exc
    config = runtime.get("config") or {}
    report(10)
    tokenizer, eos_id = _tokenizer_source(config, tokenizer_file)
    if tokenizer is None or not tokenizer.is_file():
        raise ExportError(f"the training data's tokenizer ({tokenizer or 'none recorded'}) is missing")

    vocab = int(embed.size[0])
    model = build_model(
        str(config.get("model", "tiny")), vocab_size=vocab, seq_len=int(config.get("seq_len", 1024)), seed=0
    )
    state = {"model": model.state_dict()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(state, storage_reader=FileSystemReader(str(src)), no_dist=True)
    model.load_state_dict(state["model"])
    report(40)
    model.config.use_cache = True
    if eos_id is not None:
        model.config.eos_token_id = eos_id
        model.config.pad_token_id = eos_id
        model.generation_config.eos_token_id = eos_id
        model.generation_config.pad_token_id = eos_id
    model.generation_config.do_sample = False

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with torch.no_grad():
            model.save_pretrained(tmp, safe_serialization=True)
        report(70)
        shutil.copyfile(tokenizer, tmp / TOKENIZER_FILE)
        info = {
            "format": EXPORT_FORMAT,
            "step": int(runtime.get("step", 0)),
            "source": str(src),
            "model": str(config.get("model", "")),
            "vocab_size": vocab,
            "eos_id": eos_id,
            "max_position_embeddings": int(model.config.max_position_embeddings),
            "parameters": sum(p.numel() for p in model.parameters()),
            "bytes": sum(f.stat().st_size for f in tmp.iterdir() if f.is_file()),
        }
        (tmp / EXPORT_INFO).write_text(json.dumps(info, indent=1, sort_keys=True), encoding="utf-8")
        report(90)
        if out.exists():  # another exporter finished first: keep its folder
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report(100)
    return json.loads((out / EXPORT_INFO).read_text(encoding="utf-8"))


# --- the model server ----------------------------------------------------------------------------------------


REPETITION_PENALTY = 1.3  # CTRL's penalty (Keskar et al., 2019); 1.0 = plain greedy, which loops on small models


class Generator:
    """A loaded export: ``generate(text, max_new_tokens) -> (output text, new token count)``.

    Decoding is greedy (deterministic) over logits with a repetition penalty (``REPETITION_PENALTY``). The
    prompt is cut to its last ``max_position_embeddings - max_new_tokens`` tokens. Calls are serialized
    (one model, one generation at a time). Raises ``ValueError`` for an empty text or a bad token count.

    ``device``: ``cpu``, ``cuda`` or ``cuda:<n>``; by default ``INFERENCE_DEVICE`` from the environment, else
    the first GPU when PyTorch sees one (a pod that requests ``nvidia.com/gpu`` uses it), else the CPU. Weights
    stay float32 on every device, so a GPU answers with the same greedy text as the CPU (seen on an H200:
    ``benchmarks/gpu_check.py``).
    """

    def __init__(self, model_dir: str | os.PathLike[str], repetition_penalty: float = REPETITION_PENALTY,
                 device: str | None = None) -> None:
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModelForCausalLM

        self.dir = Path(model_dir)
        self.info = json.loads((self.dir / EXPORT_INFO).read_text(encoding="utf-8"))
        self.tokenizer = Tokenizer.from_file(str(self.dir / TOKENIZER_FILE))
        self.device = torch.device(device or os.environ.get("INFERENCE_DEVICE")
                                   or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = AutoModelForCausalLM.from_pretrained(self.dir, local_files_only=True, dtype=torch.float32)
        self.model.to(self.device)
        self.model.eval()
        self.torch = torch
        self.lock = threading.Lock()
        self.repetition_penalty = repetition_penalty

    def generate(self, text: str, max_new_tokens: int) -> tuple[str, int]:
        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty string")
        if (
            isinstance(max_new_tokens, bool)
            or not isinstance(max_new_tokens, int)
            or not (1 <= max_new_tokens <= MAX_NEW_TOKENS)
        ):
            raise ValueError(f"max_new_tokens must be an integer from 1 to {MAX_NEW_TOKENS}")
        ids = self.tokenizer.encode(text).ids
        room = int(self.info["max_position_embeddings"]) - max_new_tokens
        ids = ids[-room:] or [int(self.info.get("eos_id") or 0)]
        with self.lock, self.torch.no_grad():
            inputs = self.torch.tensor([ids], dtype=self.torch.long, device=self.device)
            out = self.model.generate(
                inputs,
                attention_mask=self.torch.ones_like(inputs),
                do_sample=False,
                max_new_tokens=max_new_tokens,
                min_new_tokens=1,
                repetition_penalty=self.repetition_penalty,
            )
        new = out[0, len(ids) :].tolist()
        eos = self.info.get("eos_id")
        if eos is not None and eos in new:
            new = new[: new.index(eos)]
        return self.tokenizer.decode(new), len(new)


def make_server(model_dir: str, host: str, port: int) -> ThreadingHTTPServer:
    """The HTTP server for ``model_dir`` bound to ``host:port`` (0 = any free port); not yet serving."""
    gen = Generator(model_dir)

    class Handler(BaseHTTPRequestHandler):
        server_version = "gpu-portal-inference/1"

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path != "/healthz":
                self._send(404, {"error": "not found"})
                return
            self._send(200, {"ok": True, "step": gen.info.get("step"), "model": gen.info.get("model"),
                             "device": str(gen.device)})

        def do_POST(self) -> None:
            if self.path != "/generate":
                self._send(404, {"error": "not found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._send(413, {"error": f"body larger than {MAX_BODY_BYTES} bytes"})
                return
            try:
                body = json.loads(self.rfile.read(length) or b"null")
                if not isinstance(body, dict):
                    raise ValueError("the body must be a JSON object")
                text, n = gen.generate(body.get("text"), body.get("max_new_tokens", DEFAULT_NEW_TOKENS))
            except ValueError as exc:
                self._send(400, {"error": str(exc)})
                return
            except Exception as exc:
                self._send(500, {"error": f"{type(exc).__name__}: {exc}"})
                return
            self._send(200, {"output": text, "tokens": n})

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return ThreadingHTTPServer((host, port), Handler)


def serve(model_dir: str, host: str, port: int, ready_file: str | None = None) -> None:
    """Serve until SIGTERM/SIGINT. Writes ``{"port", "pid"}`` to ``ready_file`` (atomically) once listening."""
    httpd = make_server(model_dir, host, port)
    bound = int(httpd.server_address[1])

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if ready_file:
        tmp = f"{ready_file}.tmp"
        Path(tmp).write_text(json.dumps({"port": bound, "pid": os.getpid()}))
        os.replace(tmp, ready_file)
    print(f"serving {model_dir} on http://{host}:{bound}", flush=True)
    httpd.serve_forever()
    httpd.server_close()


# --- calling a deployment ------------------------------------------------------------------------------------


def generate(*, deployment: dict[str, Any], payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """POST ``payload`` to ``<deployment["url"]>/generate`` and return the server's JSON object.

    Raises ``TimeoutError`` when no answer comes within ``timeout_s`` seconds, ``RuntimeError`` for an error
    status or an answer that is not a JSON object (message carries the server's error), ``OSError`` when the
    server cannot be reached, ``ValueError`` for a deployment without a URL.
    """
    url = str(deployment.get("url") or "")
    if not url:
        raise ValueError("the deployment has no URL (not started)")
    body = json.dumps(payload, ensure_ascii=False).encode()
    request = urllib.request.Request(  # noqa: S310 - an http:// URL of our own deployment
        f"{url.rstrip('/')}/generate", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - our own server
            raw = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:500].decode(errors="replace")
        raise RuntimeError(f"model server answered HTTP {exc.code}: {detail}") from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise TimeoutError(f"no answer within {timeout_s:g} s") from exc
        raise OSError(f"model server unreachable: {exc.reason}") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RuntimeError("model server answered something that is not JSON") from exc
    if not isinstance(data, dict):
        raise RuntimeError("model server answered JSON that is not an object")
    return data


def healthy(deployment: dict[str, Any], timeout_s: float = 2.0) -> bool:
    """True when ``GET <url>/healthz`` answers 200 within ``timeout_s``."""
    url = str(deployment.get("url") or "")
    if not url:
        return False
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/healthz", timeout=timeout_s) as r:  # noqa: S310
            return r.status == 200
    except (OSError, ValueError):
        return False


# --- local deployments ---------------------------------------------------------------------------------------

# Popen objects of servers started by this process, so stopped ones are reaped rather than left as zombies.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class LocalDeployments:
    """Model servers as local processes, one per deployment name, under ``root/<name>/``.

    A deployment dict (JSON-ready, stored by the caller) holds ``backend`` ("local"), ``name``, ``pid``
    (= process group id: the server leads its own session), ``port``, ``url``, ``model_dir``, ``log`` and
    ``started_at`` (unix seconds). A pid is only trusted while ``/proc/<pid>/cmdline`` still names this
    module and the deployment's model folder, so a reused pid is never signalled.
    """

    def __init__(
        self, root: str | os.PathLike[str], *, python: str = sys.executable, host: str = "127.0.0.1", threads: int = 1
    ) -> None:
        self.root = Path(root)
        self.python = python
        self.host = host
        self.threads = threads

    def alive(self, deployment: dict[str, Any]) -> bool:
        """Whether the deployment's server process still runs (a zombie counts as gone)."""
        pid = int(deployment.get("pid") or 0)
        if pid <= 0:
            return False
        proc = _CHILDREN.get(pid)
        if proc is not None and proc.poll() is not None:
            _CHILDREN.pop(pid, None)
            return False
        cmd = _cmdline(pid)
        if SERVER_MODULE not in cmd or str(deployment.get("model_dir")) not in cmd:
            return False
        try:
            status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return status != "Z"

    def start(
        self,
        *,
        name: str,
        model_dir: str | os.PathLike[str],
        deployment: dict[str, Any] | None = None,
        ready_timeout_s: float = 120.0,
    ) -> dict[str, Any]:
        """Start (or find) the server of ``name`` for ``model_dir`` and wait until it answers ``/healthz``.

        Idempotent: a ``deployment`` whose process is alive and healthy is returned unchanged. Raises
        ``RuntimeError`` (with the end of the server's log) when the process exits or is not ready within
        ``ready_timeout_s``; the process is stopped first.
        """
        if deployment and self.alive(deployment) and healthy(deployment):
            return deployment
        if deployment and self.alive(deployment):
            self.stop(deployment)
        ws = self.root / name
        ws.mkdir(parents=True, exist_ok=True)
        ready, log = ws / "ready.json", ws / "server.log"
        ready.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV")}
        env.update(
            {
                "PYTHONPATH": str(PROJECT_ROOT),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                "TRANSFORMERS_VERBOSITY": "error",
                "OMP_NUM_THREADS": str(self.threads),
                "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1",
            }
        )
        cmd = [
            self.python,
            "-m",
            SERVER_MODULE,
            "serve",
            "--model-dir",
            str(Path(model_dir).resolve()),
            "--host",
            self.host,
            "--port",
            "0",
            "--ready-file",
            str(ready),
        ]
        with open(log, "ab") as fh:
            proc = subprocess.Popen(
                cmd,
                cwd=PROJECT_ROOT,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        _CHILDREN[proc.pid] = proc
        dep = {
            "backend": "local",
            "name": name,
            "pid": proc.pid,
            "port": None,
            "url": "",
            "model_dir": str(Path(model_dir).resolve()),
            "log": str(log),
            "started_at": int(time.time()),
        }
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the model server exited with code {proc.returncode}: {self._tail(log)}")
            if ready.is_file():
                port = int(json.loads(ready.read_text())["port"])
                dep.update(port=port, url=f"http://{self.host}:{port}")
                if healthy(dep):
                    return dep
            if time.monotonic() > deadline:
                self.stop(dep)
                raise RuntimeError(f"the model server was not ready within {ready_timeout_s:g} s: {self._tail(log)}")
            time.sleep(0.1)

    def stop(self, deployment: dict[str, Any], grace_s: float = 10.0) -> bool:
        """SIGTERM the server's process group, SIGKILL after ``grace_s``; True when a process was stopped."""
        if not self.alive(deployment):
            return False
        pgid = int(deployment["pid"])
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.alive(deployment) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive(deployment):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        proc = _CHILDREN.pop(pgid, None)
        if proc is not None:
            proc.wait(timeout=grace_s)
        return True

    @staticmethod
    def _tail(log: Path, chars: int = 800) -> str:
        try:
            return log.read_text(errors="replace")[-chars:].strip()
        except OSError:
            return ""


# --- Kubernetes ----------------------------------------------------------------------------------------------


def kubernetes_manifests(
    *,
    name: str,
    namespace: str,
    image: str,
    model_claim: str,
    model_path: str,
    gpus: int = 0,
    cpu: str = "2",
    memory: str = "8Gi",
    port: int = 8080,
    replicas: int = 1,
) -> list[dict[str, Any]]:
    """Deployment + Service serving the export at ``model_path`` inside the PVC ``model_claim`` (read-only).

    Built with the official client's models and serialized by ``ApiClient.sanitize_for_serialization``.
    The pod runs ``python -m instances.inference serve`` on ``port`` with readiness and liveness probes on
    ``/healthz``; ``gpus`` > 0 requests ``nvidia.com/gpu``. The Service (ClusterIP, port 80) makes the
    deployment's URL ``http://<name>.<namespace>.svc``. ``name`` must be a DNS-1035 label.
    """
    from kubernetes import client

    labels = {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "app.kubernetes.io/component": "inference",
        "gpu-portal/deployment": name,
    }
    limits = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    probe = client.V1Probe(http_get=client.V1HTTPGetAction(path="/healthz", port=port), period_seconds=10)
    container = client.V1Container(
        name="server",
        image=image,
        command=[
            "python",
            "-m",
            SERVER_MODULE,
            "serve",
            "--model-dir",
            f"/models/{model_path.strip('/')}",
            "--host",
            "0.0.0.0",  # noqa: S104 - inside the pod, behind the Service
            "--port",
            str(port),
        ],
        ports=[client.V1ContainerPort(container_port=port, name="http")],
        env=[client.V1EnvVar(name="HF_HUB_OFFLINE", value="1")],
        resources=client.V1ResourceRequirements(requests={"cpu": cpu, "memory": memory}, limits=limits),
        readiness_probe=probe,
        liveness_probe=client.V1Probe(
            http_get=client.V1HTTPGetAction(path="/healthz", port=port), initial_delay_seconds=60, period_seconds=20
        ),
        volume_mounts=[client.V1VolumeMount(name="models", mount_path="/models", read_only=True)],
    )
    deployment = client.V1Deployment(
        api_version="apps/v1",
        kind="Deployment",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels={"gpu-portal/deployment": name}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[container],
                    volumes=[
                        client.V1Volume(
                            name="models",
                            persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(
                                claim_name=model_claim, read_only=True
                            ),
                        )
                    ],
                ),
            ),
        ),
    )
    service = client.V1Service(
        api_version="v1",
        kind="Service",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=labels),
        spec=client.V1ServiceSpec(
            selector={"gpu-portal/deployment": name},
            ports=[client.V1ServicePort(name="http", port=80, target_port=port)],
        ),
    )
    api = client.ApiClient()
    return [api.sanitize_for_serialization(deployment), api.sanitize_for_serialization(service)]


DEPLOYMENT_LABEL = "gpu-portal/deployment"
RESTART_ANNOTATION = "gpu-portal/restarted-at"  # a new value rolls the pods, as ``kubectl rollout restart`` does
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


class DeploymentError(RuntimeError):
    """A deployment cannot be applied, read or deleted, or had no ready replica in time. The message names the
    object (``<namespace>/<name>``) and the cause the cluster reports."""


class Deployments(Protocol):
    """What the marketplace needs of a deployment backend (``LocalDeployments``, ``KubernetesDeployments``)."""

    def start(
        self, *, name: str, model_dir: str | os.PathLike[str], deployment: dict[str, Any] | None = None
    ) -> dict[str, Any]: ...

    def alive(self, deployment: dict[str, Any]) -> bool: ...

    def stop(self, deployment: dict[str, Any]) -> bool: ...


class KubernetesDeployments:
    """Model servers as one Deployment + Service per deployment name (``kubernetes_manifests``), applied with
    the official client.

    Where the model lives: the export is written by the portal's worker under ``model_root``, which is where
    the PersistentVolumeClaim ``model_claim`` is mounted on the worker; ``model_subpath`` is the folder of
    that mount inside the claim ("" = the claim's root). An export at ``<model_root>/legal/v1`` is therefore
    ``<model_subpath>/legal/v1`` in the claim and ``/models/<model_subpath>/legal/v1`` in the pod.

    A deployment dict (JSON-ready) holds ``backend`` ("kubernetes"), ``name``, ``namespace``, ``url`` (the
    Service, port 80: ``url_template`` formatted with name and namespace), ``model_dir``, ``model_claim``,
    ``model_path`` (inside the claim), ``image`` and ``started_at`` (unix seconds).

    Options: ``image`` and ``model_claim`` (required), ``model_root``, ``model_subpath``, ``namespace``
    (default ``"gpu-portal-apps"``), ``api_client`` / ``in_cluster`` / ``kubeconfig`` (as
    ``instances.backends.kubernetes.KubernetesBackend``, whose client loading is reused), ``gpus``, ``cpu``,
    ``memory``, ``port``, ``ready_timeout_s`` (default 600 s: image pull and model load), ``poll_s``
    (status polling interval, default 2 s), ``url_template``. Raises ``DeploymentError`` for a missing
    image or claim.
    """

    name = "kubernetes"

    def __init__(
        self,
        *,
        image: str,
        model_claim: str,
        model_root: str | os.PathLike[str],
        model_subpath: str = "",
        namespace: str = "gpu-portal-apps",
        api_client: Any = None,
        in_cluster: bool = False,
        kubeconfig: str | None = None,
        gpus: int = 0,
        cpu: str = "2",
        memory: str = "8Gi",
        port: int = 8080,
        ready_timeout_s: float = 600.0,
        poll_s: float = 2.0,
        url_template: str = "http://{name}.{namespace}.svc",
    ) -> None:
        if not image or not model_claim:
            raise DeploymentError("Kubernetes deployments need the options 'image' and 'model_claim'")
        self.image = image
        self.model_claim = model_claim
        self.model_root = Path(model_root)
        self.model_subpath = model_subpath.strip("/")
        self.namespace = namespace
        self._api_client = api_client
        self.in_cluster = in_cluster
        self.kubeconfig = kubeconfig
        self.gpus = gpus
        self.cpu = cpu
        self.memory = memory
        self.port = port
        self.ready_timeout_s = ready_timeout_s
        self.poll_s = poll_s
        self.url_template = url_template

    # -- client ----------------------------------------------------------------------------------------------
    @property
    def api_client(self) -> Any:
        """The ``ApiClient``: the given one, else loaded the way the Kubernetes compute backend loads it."""
        if self._api_client is None:
            from instances.backends.kubernetes import KubernetesBackend

            backend = KubernetesBackend(
                namespace=self.namespace, in_cluster=self.in_cluster, kubeconfig=self.kubeconfig
            )
            self._api_client = backend.api_client
        return self._api_client

    def _apps(self) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.api_client)

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    # -- manifests -------------------------------------------------------------------------------------------
    def model_path(self, model_dir: str | os.PathLike[str]) -> str:
        """The export's folder inside the claim. Raises ``DeploymentError`` when it is not under ``model_root``
        (the pod could not see it)."""
        try:
            rel = Path(model_dir).resolve().relative_to(self.model_root.resolve())
        except ValueError:
            raise DeploymentError(
                f"the export {model_dir} is not under {self.model_root}, where the claim {self.model_claim} is "
                "mounted: the pod cannot read it"
            ) from None
        return str(PurePosixPath(self.model_subpath, rel.as_posix())) if self.model_subpath else rel.as_posix()

    def manifests(
        self, *, name: str, model_dir: str | os.PathLike[str], restarted_at: str | None = None
    ) -> list[dict[str, Any]]:
        """Deployment and Service for ``name`` (``kubernetes_manifests``); ``restarted_at`` sets the pod template
        annotation ``RESTART_ANNOTATION`` so that applying it rolls new pods. Raises ``DeploymentError`` for a
        name that is not a DNS-1035 label or an export outside ``model_root``."""
        if not _DNS_1035.fullmatch(name):
            raise DeploymentError(f"{name!r} is not a DNS-1035 label (a-z, 0-9, '-', at most 63 characters)")
        manifests = kubernetes_manifests(
            name=name,
            namespace=self.namespace,
            image=self.image,
            model_claim=self.model_claim,
            model_path=self.model_path(model_dir),
            gpus=self.gpus,
            cpu=self.cpu,
            memory=self.memory,
            port=self.port,
        )
        if restarted_at:
            manifests[0]["spec"]["template"]["metadata"]["annotations"] = {RESTART_ANNOTATION: restarted_at}
        return manifests

    # -- the interface ---------------------------------------------------------------------------------------
    def alive(self, deployment: dict[str, Any]) -> bool:
        """Whether the deployment has a ready replica (pods pass the ``/healthz`` readiness probe). A deployment
        of another backend, or one deleted from the cluster (404), is not alive. Raises ``DeploymentError``
        when the API server answers another error."""
        from kubernetes.client.exceptions import ApiException

        name = str(deployment.get("name") or "")
        if deployment.get("backend") != self.name or not name:
            return False
        namespace = str(deployment.get("namespace") or self.namespace)
        try:
            obj = self._apps().read_namespaced_deployment_status(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise DeploymentError(f"reading deployment {namespace}/{name}: {exc.status} {exc.reason}") from exc
        return _ready(obj)

    def start(
        self, *, name: str, model_dir: str | os.PathLike[str], deployment: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Create (or replace, on 409) the Deployment and create (or patch, on 409) the Service of ``name`` for
        ``model_dir``, then wait until the Deployment has a ready replica; returns the deployment dict.

        Idempotent: a ``deployment`` of this backend that is alive is returned unchanged, and applying the same
        objects again changes nothing. A ``deployment`` that ran before (``started_at``) and is not alive is
        restarted: the pod template gets a new ``RESTART_ANNOTATION``, so the cluster rolls new pods. Raises
        ``DeploymentError`` when the API server refuses an object or no replica is ready within
        ``ready_timeout_s`` (the message carries the Deployment's failing conditions and the pods' waiting
        reasons, e.g. ``ImagePullBackOff``); the objects are deleted first, as the local backend stops its
        process.
        """
        from kubernetes.client.exceptions import ApiException

        if deployment and deployment.get("backend") == self.name and self.alive(deployment):
            return deployment
        restarted_at = None
        if deployment and deployment.get("backend") == self.name and deployment.get("started_at"):
            restarted_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        dep_manifest, svc_manifest = self.manifests(name=name, model_dir=model_dir, restarted_at=restarted_at)
        apps, core = self._apps(), self._core()
        steps = (
            (
                apps.create_namespaced_deployment,
                lambda: apps.replace_namespaced_deployment(name, self.namespace, dep_manifest),
                dep_manifest,
            ),
            (
                core.create_namespaced_service,
                lambda: core.patch_namespaced_service(
                    name, self.namespace, svc_manifest, _content_type=STRATEGIC_MERGE
                ),
                svc_manifest,
            ),
        )
        for create, update, body in steps:
            try:
                try:
                    create(self.namespace, body)
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                    update()  # AlreadyExists: a retried task or a restart brings the object up to date
            except ApiException as exc:
                raise DeploymentError(
                    f"applying {body['kind']} {self.namespace}/{name}: {exc.status} {exc.reason}"
                ) from exc
        result = {
            "backend": self.name,
            "name": name,
            "namespace": self.namespace,
            "url": self.url_template.format(name=name, namespace=self.namespace),
            "model_dir": str(Path(model_dir).resolve()),
            "model_claim": self.model_claim,
            "model_path": self.model_path(model_dir),
            "image": self.image,
            "started_at": int(time.time()),
        }
        self._wait_ready(result)
        return result

    def _wait_ready(self, deployment: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        name, namespace = deployment["name"], deployment["namespace"]
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            try:
                obj = self._apps().read_namespaced_deployment_status(name, namespace)
            except ApiException as exc:
                raise DeploymentError(f"reading deployment {namespace}/{name}: {exc.status} {exc.reason}") from exc
            if _ready(obj):
                return
            if time.monotonic() >= deadline:
                reason = self._not_ready_reason(obj)
                self.stop(deployment)
                raise DeploymentError(
                    f"deployment {namespace}/{name} had no ready replica within {self.ready_timeout_s:g} s: {reason}"
                )
            time.sleep(self.poll_s)

    def _not_ready_reason(self, obj: Any) -> str:
        """The Deployment's false conditions and its pods' waiting or terminated reasons, in words."""
        parts = [
            f"{c.type}={c.status} ({c.reason}: {c.message})"
            for c in (obj.status.conditions or [])
            if str(c.status) != "True"
        ]
        try:
            pods = (
                self._core()
                .list_namespaced_pod(
                    obj.metadata.namespace or self.namespace, label_selector=f"{DEPLOYMENT_LABEL}={obj.metadata.name}"
                )
                .items
            )
        except Exception:  # the reason is best effort; the timeout itself is the error
            pods = []
        for pod in pods:
            for cs in (pod.status.container_statuses or []) if pod.status else []:
                state = cs.state
                detail = state.waiting if state and state.waiting else state.terminated if state else None
                if detail is not None and detail.reason:
                    parts.append(
                        f"pod {pod.metadata.name}: {detail.reason} ({detail.message or ''})".replace(" ()", "")
                    )
        return "; ".join(parts) or "no status reported yet"

    def stop(self, deployment: dict[str, Any], grace_s: float = 30.0) -> bool:
        """Delete the Deployment (its pods get ``grace_s`` seconds) and the Service; True when something was
        deleted, False when both were already gone (404) or the dict is not of this backend. Raises
        ``DeploymentError`` for another API error."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        name = str(deployment.get("name") or "")
        if deployment.get("backend") != self.name or not name:
            return False
        namespace = str(deployment.get("namespace") or self.namespace)
        options = client.V1DeleteOptions(propagation_policy="Background", grace_period_seconds=int(grace_s))
        apps, core = self._apps(), self._core()
        deleted = False
        for kind, delete in (
            ("Deployment", lambda: apps.delete_namespaced_deployment(name, namespace, body=options)),
            ("Service", lambda: core.delete_namespaced_service(name, namespace)),
        ):
            try:
                delete()
                deleted = True
            except ApiException as exc:
                if exc.status != 404:
                    raise DeploymentError(f"deleting {kind} {namespace}/{name}: {exc.status} {exc.reason}") from exc
        return deleted


def _ready(obj: Any) -> bool:
    """A Deployment with at least one ready replica whose status describes its current spec."""
    status, meta = obj.status, obj.metadata
    if status is None:
        return False
    generation, observed = getattr(meta, "generation", None), status.observed_generation
    if generation is not None and observed is not None and observed < generation:
        return False  # the controller has not yet seen the spec we just applied
    return int(status.ready_replicas or 0) >= 1


def get_deployments(name: str, **options: Any) -> LocalDeployments | KubernetesDeployments:
    """The deployment backend ``name`` (``"local"``: ``LocalDeployments(options.pop("root"), **options)``;
    ``"kubernetes"``: ``KubernetesDeployments(**options)``). Raises ``ValueError`` for another name and
    ``DeploymentError`` for missing Kubernetes options."""
    if name == "local":
        root = options.pop("root")
        return LocalDeployments(root, **options)
    if name == "kubernetes":
        return KubernetesDeployments(**options)
    raise ValueError(f"unknown deployment backend {name!r}; expected 'local' or 'kubernetes'")


# --- command line --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instances.inference", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve an exported model over HTTP (POST /generate, GET /healthz)")
    s.add_argument("--model-dir", required=True)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8080, help="0 = any free port")
    s.add_argument("--ready-file", default=None, help="written with the bound port once serving")
    e = sub.add_parser("export", help="export a complete DCP checkpoint folder to a Hugging Face folder")
    e.add_argument("checkpoint_dir")
    e.add_argument("out_dir")
    e.add_argument("--tokenizer", default=None)
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.model_dir, args.host, args.port, args.ready_file)
    else:
        print(json.dumps(export_checkpoint(args.checkpoint_dir, args.out_dir, tokenizer_file=args.tokenizer)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
