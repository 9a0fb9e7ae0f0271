"""Shared fixtures: the tiny models are built once per test session into a temp dir (no hub, no network)."""

import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_vl_path(tmp_path_factory):
    from mmevo.models.tiny import build_tiny_qwen2_5_vl

    return build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("models") / "tiny-vl")


@pytest.fixture(scope="session")
def tiny_text_path(tmp_path_factory):
    from mmevo.models.tiny import build_tiny_qwen2

    return build_tiny_qwen2(tmp_path_factory.mktemp("models") / "tiny-text")


def randomize(model, std=0.3, seed=0):
    """Give a freshly initialised tiny model varied outputs (default init makes every logit nearly equal)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * std)
    return model


def randomized_model(path, seed=0, save_to=None):
    """The tiny model at ``path`` with varied outputs (``randomize``), in eval mode; with ``save_to`` it is saved
    there and reloaded from it (an engine such as vLLM starts from that checkpoint)."""
    from mmevo.models.loader import load_model

    lm = load_model(path)
    randomize(lm.model, seed=seed)
    if save_to is not None:
        lm.model.save_pretrained(save_to)
        lm.processor.save_pretrained(save_to)
        lm = load_model(save_to)
    lm.model.eval()
    return lm


def vllm_test_config(max_prompt_length=256, max_tokens=64, **rollout):
    """A Config for a vLLM engine on the tiny model in float32 (``rollout`` sets further rollout fields)."""
    from mmevo.config import Config

    cfg = Config()
    cfg.rollout.engine = "vllm"
    cfg.model.dtype = "float32"
    cfg.data.max_prompt_length = max_prompt_length
    cfg.rollout.max_tokens = max_tokens
    for k, v in rollout.items():
        setattr(cfg.rollout, k, v)
    return cfg


def noise_image(seed, size=(56, 56)):
    """A seeded RGB noise image of ``size`` (width, height)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def png_image(png: bytes):
    """A rendered PNG as a PIL image."""
    import io

    from PIL import Image

    return Image.open(io.BytesIO(png))


def ink_spreads(png: bytes) -> tuple[int, int]:
    """(grey-level spread, alpha spread) of a rendered PNG: a blank canvas has both near 0, ink on a background a large
    grey spread, ink on transparency a large alpha spread."""
    im = png_image(png).convert("RGBA")
    return tuple(hi - lo for lo, hi in (im.convert("L").getextrema(), im.getchannel("A").getextrema()))


def drawn_pixels(png: bytes) -> int:
    """How many pixels of a rendered PNG are not fully transparent."""
    return sum(png_image(png).convert("RGBA").getchannel("A").histogram()[1:])


def ink_box(png: bytes):
    """The bounding box (left, top, right, bottom) of a rendered PNG's non-transparent pixels, None for a blank one."""
    return png_image(png).convert("RGBA").getchannel("A").getbbox()


def render_svg(pool, svg: str, timeout_s: float = 20.0):
    """``svg`` rendered by ``pool`` (a ``RenderResult``)."""
    from render import RenderJob

    return pool.render(RenderJob(svg, "svg"), timeout_s=timeout_s)


def decode_vl_requests(lm):
    """Two image prompts of the tiny VL model, 5 and 3 samples each (the decode-step tests' VL requests)."""
    from mmevo.models.inputs import encode_prompt
    from mmevo.rollout.base import RolloutRequest

    prompts = [encode_prompt(lm.processor, True, "<image>Find angle C.", [noise_image(1)]),
               encode_prompt(lm.processor, True, "In triangle ABC, <image> find x.", [noise_image(2, (70, 42))])]
    return [RolloutRequest(prompts[0], n=5), RolloutRequest(prompts[1], n=3)]


def decode_text_requests(lm):
    """Two text prompts, 4 samples each (the decode-step tests' text requests)."""
    from mmevo.models.inputs import encode_prompt
    from mmevo.rollout.base import RolloutRequest

    enc = [encode_prompt(lm.tokenizer, False, text, []) for text in ("What is 2 + 3?", "Name a prime number.")]
    return [RolloutRequest(enc[0], n=4), RolloutRequest(enc[1], n=4)]


def hf_engine(lm, **kw):
    """The HF engine of a loaded model, with its stop tokens and its vision placeholders banned (as the recipes build it)."""
    from mmevo.models.loader import stop_token_ids, vision_token_ids
    from mmevo.rollout.hf import HFEngine

    return HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_token_ids(lm.tokenizer, lm.model),
                    banned_ids=vision_token_ids(lm.tokenizer), **kw)


def two_vl_prompts(lm):
    """Two encoded VL prompts of different lengths and image sizes."""
    from PIL import Image

    from mmevo.models.inputs import encode_prompt

    imgs = [Image.new("RGB", (56, 56), "white"), Image.new("RGB", (70, 42), (200, 30, 30))]
    return [encode_prompt(lm.processor, True, "<image>Find angle C.", [imgs[0]]),
            encode_prompt(lm.processor, True, "In triangle ABC, angle A = 50 and angle B = 60. <image> Find x.",
                          [imgs[1]])]


def hf_greedy(lm, prompt, max_new, stops, banned, prefix=()):
    """transformers' greedy continuation of prompt + prefix, with the same stops and suppressed tokens."""
    if prompt.images:
        enc = lm.processor(text=[prompt.text], images=prompt.images, return_tensors="pt")
    else:
        enc = lm.tokenizer([prompt.text], return_tensors="pt", add_special_tokens=False)
    if prefix:
        enc["input_ids"] = torch.cat([enc["input_ids"], torch.tensor([list(prefix)])], 1)
        enc["attention_mask"] = torch.ones_like(enc["input_ids"])
        if "mm_token_type_ids" in enc:
            enc["mm_token_type_ids"] = torch.cat(
                [enc["mm_token_type_ids"], torch.zeros(1, len(prefix), dtype=torch.long)], 1)
    out = lm.model.generate(**enc, max_new_tokens=max_new, do_sample=False, eos_token_id=list(stops),
                            pad_token_id=lm.tokenizer.pad_token_id, suppress_tokens=list(banned))
    ids = out[0, enc["input_ids"].shape[1]:].tolist()
    for i, t in enumerate(ids):  # generate pads after the first stop
        if t in stops:
            return ids[:i + 1]
    return ids


def load_script(name: str):
    """``scripts/<name>.py`` imported as a module (with ``scripts/`` importable for its own imports)."""
    import importlib.util
    import sys

    scripts = Path(__file__).resolve().parents[1] / "scripts"
    if str(scripts) not in sys.path:
        sys.path.insert(0, str(scripts))
    spec = importlib.util.spec_from_file_location(name, scripts / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def proc_status():
    """(pid, fields of /proc/<pid>/status) of every process that can be read now."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:  # gone meanwhile
            continue
        yield int(d), fields


def job_processes(pool):
    """Live processes started for a render pool's jobs: children of its workers or of their zygotes, not the zygotes."""
    zygotes = {w.zygote_pid for w in pool._workers}
    parents = set(pool.worker_pids()) | zygotes
    return [pid for pid, f in proc_status() if int(f["PPid"].strip()) in parents and pid not in zygotes]


def png_pixel(png: bytes, xy):
    """The RGB colour of pixel ``xy`` of a PNG given as bytes."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return im.convert("RGB").getpixel(xy)


def start_render_pool(**kw):
    """A render.RenderPool, or a skip where the full sandbox cannot start (no root / no Landlock in a container)."""
    from render import RenderPool, RenderPoolError

    try:
        return RenderPool(**kw)
    except RenderPoolError as e:
        pytest.skip(f"full sandbox unavailable here: {e}")


@pytest.fixture(scope="module")
def render_pool():
    p = start_render_pool(workers=2)
    yield p
    p.close()


@pytest.fixture
def no_runs(monkeypatch):
    """Every runner the CLI can reach, replaced by a recorder: only parsing and the up-front checks run."""
    import mmevo.demo
    import mmevo.eval.runner
    import mmevo.evolve.mmzero
    import mmevo.evolve.prism
    import mmevo.honest.calibration
    import mmevo.honest.loop
    import mmevo.memory_plan
    import mmevo.prism.clusters
    from mmevo import recipes

    calls = []

    def record(name, result):
        def run(*args, **kwargs):
            calls.append(name)
            return result
        return run

    monkeypatch.setattr(recipes, "run_grpo", record("train", {}))
    monkeypatch.setattr(recipes, "run_sft", record("sft", {}))
    monkeypatch.setattr(recipes, "run_eval", record("eval", {}))
    monkeypatch.setattr(mmevo.eval.runner, "run_benchmark", record("benchmark", {}))
    monkeypatch.setattr(mmevo.honest.calibration, "run_calibration_eval", record("calibration", {}))
    monkeypatch.setattr(mmevo.evolve.mmzero, "run_mmzero", record("mmzero", {"iterations": []}))
    monkeypatch.setattr(mmevo.evolve.prism, "run_prism", record("prism", {"iterations": []}))
    monkeypatch.setattr(mmevo.honest.loop, "run_honest", record("honest", {}))
    monkeypatch.setattr(mmevo.prism.clusters, "build_clusters", record("build-clusters", {}))
    monkeypatch.setattr(mmevo.memory_plan, "plan", record("plan-memory", {}))
    monkeypatch.setattr(mmevo.demo, "run_demo", record("demo", {}))
    # the shipped configs name configs/deepspeed/*.json from the repository root
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    return calls


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    # the suite runs with wandb disabled (above); a test taking this fixture really writes offline runs, under tmp_path
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var, sub in (("WANDB_DIR", "wandb_dir"), ("WANDB_CACHE_DIR", "wandb_cache"),
                     ("WANDB_CONFIG_DIR", "wandb_config"), ("WANDB_DATA_DIR", "wandb_data")):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    return tmp_path
