"""Turn prompts (+ images) and responses into model inputs with correct padding and (m)rope positions.

One place owns this because it is easy to get silently wrong: Qwen2.5-VL positions depend on the image grids and on
``mm_token_type_ids``; when a prompt is continued (CSRS retrace) or scored with its response appended, the type ids
must be extended with zeros (text) and positions recomputed over the whole sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate
from typing import Sequence

import torch
from PIL import Image

from mmevo.data.images import _EXIF_ORIENTATION, to_rgb


@dataclass
class EncodedPrompt:
    """A chat-templated prompt, tokenised with image placeholders already expanded."""

    text: str  # chat-templated prompt text (what vLLM gets)
    images: list[Image.Image]  # RGB images in placeholder order
    input_ids: list[int]  # token ids incl. expanded <|image_pad|> runs
    mm_token_type_ids: list[int]  # 0 text, 1 image, per token
    pixel_values: torch.Tensor | None = None  # [n_patches, patch_dim] for all images of this prompt
    image_grid_thw: torch.Tensor | None = None  # [n_images, 3]
    meta: dict = field(default_factory=dict)


def chat_messages(problem: str, system_prompt: str | None, n_images: int) -> list[dict]:
    """Messages in the transformers chat format; ``<image>`` in the problem marks where the image goes."""
    content: list[dict] = []
    text = problem
    if n_images:
        parts = text.split("<image>")
        if len(parts) - 1 != n_images:  # placeholders missing or miscounted: images first, like EasyR1
            parts = [""] * n_images + [text.replace("<image>", "")]
        for i, part in enumerate(parts):
            if part:
                content.append({"type": "text", "text": part})
            if i < n_images:
                content.append({"type": "image"})
    else:
        content.append({"type": "text", "text": text.replace("<image>", "")})
    messages = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": content})
    return messages


def encode_prompt(processor, is_vl: bool, problem: str, images: Sequence[Image.Image],
                  system_prompt: str | None = None) -> EncodedPrompt:
    """Apply the chat template and tokenise one prompt (images expanded to their placeholder tokens).

    Images are made plain RGB first (``plain_rgb``): the trainer's processor and vLLM convert other modes differently
    (RGBA / LA: transformers drops the alpha, vLLM composites on white; an EXIF orientation: only vLLM applies it), so
    the vLLM engine sampled from another image than the one the trainer scores."""
    images = [plain_rgb(im) for im in images] if is_vl else []
    messages = chat_messages(problem, system_prompt, len(images))
    tok = processor.tokenizer if is_vl else processor
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    if is_vl and images:
        enc = processor(text=[text], images=images, return_tensors="pt")
        ids = enc["input_ids"][0].tolist()
        types = enc["mm_token_type_ids"][0].tolist() if "mm_token_type_ids" in enc else [
            int(t == processor.image_token_id) for t in ids]
        return EncodedPrompt(text, images, ids, types, enc["pixel_values"], enc["image_grid_thw"])
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return EncodedPrompt(text, [], ids, [0] * len(ids))


def plain_rgb(image: Image.Image) -> Image.Image:
    """``image`` itself when both processors read it alike (``needs_rgb_conversion``), else ``to_rgb``'s RGB copy
    (transparency on white, wide grey scaled, EXIF orientation applied), as the data pipeline loads images."""
    return image if needs_rgb_conversion(image) is None else to_rgb(image)


def needs_rgb_conversion(image) -> str | None:
    """Why the trainer's processor and vLLM would read ``image`` differently: its mode is not RGB, or it carries an
    EXIF orientation (vLLM applies it, transformers does not); None for an RGB image without one, and for what is not
    a PIL image (an array: both processors read its channels as given)."""
    if not isinstance(image, Image.Image):
        return None
    if image.mode != "RGB":
        return f"its mode is {image.mode!r}, not 'RGB'"
    if "transparency" in image.info:  # a PNG tRNS colour: vLLM composites it on white, transformers keeps it
        return "it has a transparent colour"
    if image.info:  # an orientation lives in the metadata: an image without any has none
        try:
            turn = image.getexif().get(_EXIF_ORIENTATION, 1)
        except Exception:  # noqa: BLE001 - a malformed EXIF block: vLLM (exif_transpose) leaves the image as stored
            turn = 1
        if turn not in (1, None):
            return f"it carries EXIF orientation {turn}"
    return None


@dataclass
class Batch:
    """Left-padded token batch ready for a forward pass."""

    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    position_ids: torch.Tensor  # [3, B, L] (VL) or [B, L] (text)
    pixel_values: torch.Tensor | None  # [sum patches, patch_dim]
    image_grid_thw: torch.Tensor | None  # [n_images, 3]
    next_position: torch.Tensor  # [B] text position of the token after the last one

    def model_kwargs(self) -> dict:
        kw = dict(input_ids=self.input_ids, attention_mask=self.attention_mask, position_ids=self.position_ids)
        if self.pixel_values is not None:
            kw.update(pixel_values=self.pixel_values, image_grid_thw=self.image_grid_thw)
        return kw


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside a DeepSpeed / DDP wrapper."""
    return getattr(model, "module", model)


def compute_positions(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, mm_token_type_ids: torch.Tensor,
                      image_grid_thw: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions, next_position): mrope [3,B,L] for VL models with images, plain [B,L] cumsum otherwise."""
    base = unwrap(model)
    inner = getattr(base, "model", None)
    if image_grid_thw is not None and hasattr(inner, "get_rope_index"):
        pos, deltas = inner.get_rope_index(
            input_ids, mm_token_type_ids=mm_token_type_ids, image_grid_thw=image_grid_thw, attention_mask=attention_mask
        )
        # rope delta = (max position + 1) - number of real tokens; the next text token sits at n_real + delta
        next_pos = attention_mask.sum(-1) + deltas.view(-1)
        return pos, next_pos
    pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    next_pos = attention_mask.sum(-1)
    if hasattr(inner, "get_rope_index"):  # VL model on a text-only batch still takes 3 position rows
        pos = pos.unsqueeze(0).expand(3, -1, -1)
    return pos, next_pos


def collate(model, prompts: Sequence[EncodedPrompt], continuations: Sequence[Sequence[int]] | None, pad_id: int,
            device: str | torch.device = "cpu") -> Batch:
    """Left-pad prompt + continuation ids into one batch (generation prefill: the continuation is a retrace prefix)."""
    conts = continuations if continuations is not None else [[] for _ in prompts]
    seqs = [list(p.input_ids) + list(c) for p, c in zip(prompts, conts)]
    _refuse_empty(seqs, "prompt" if continuations is None else "prompt + continuation")
    types = [list(p.mm_token_type_ids) + [0] * len(c) for p, c in zip(prompts, conts)]
    L = max(len(s) for s in seqs)
    B = len(seqs)
    input_ids = torch.full((B, L), pad_id, dtype=torch.long)
    mask = torch.zeros((B, L), dtype=torch.long)
    mm_types = torch.zeros((B, L), dtype=torch.long)
    for i, (s, t) in enumerate(zip(seqs, types)):
        input_ids[i, L - len(s):] = torch.tensor(s)
        mask[i, L - len(s):] = 1
        mm_types[i, L - len(t):] = torch.tensor(t)
    pixel_values, grids = _stack_images(prompts)
    input_ids, mask, mm_types = input_ids.to(device), mask.to(device), mm_types.to(device)
    if grids is not None:
        grids = grids.to(device)
        pixel_values = pixel_values.to(device)
    pos, next_pos = compute_positions(model, input_ids, mask, mm_types, grids)
    return Batch(input_ids, mask, pos, pixel_values, grids, next_pos)


def check_samples(prompts: Sequence, responses: Sequence) -> None:
    """Samples are (prompt, response) pairs: one response per prompt, and at least one sample (zip would silently
    drop the extra ones, and a shared-prompt layout would give another sample's response to a prompt); a response is a
    flat sequence of integer token ids."""
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses: one response per prompt")
    if not len(prompts):
        raise ValueError("no samples (prompts and responses are empty)")
    for i, r in enumerate(responses):
        # the long id tensors would truncate 5.7 to token 5 and read True as token 1 (an embedding refuses both)
        ids = torch.as_tensor(r if hasattr(r, "dtype") else list(r))  # a tensor / array as it is
        if len(r) and (ids.dim() != 1 or ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex()):
            raise ValueError(f"response {i}: token ids must be a flat sequence of integers, got {ids.dtype} of shape "
                             f"{tuple(ids.shape)}")


def _refuse_empty(seqs: Sequence[Sequence[int]], what: str) -> None:
    """An empty sequence has no state to predict from: its slot would be all padding (its 'next token' logits those
    of a pad) and, packed, its first response token would be predicted by the sequence before it."""
    empty = [i for i, s in enumerate(seqs) if not len(s)]
    if empty:
        raise ValueError(f"{what} {empty[0]} has no tokens (EncodedPrompt.input_ids is empty)")


def _stack_images(prompts: Sequence[EncodedPrompt]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    pv = [p.pixel_values for p in prompts if p.pixel_values is not None]
    if not pv:
        return None, None
    grids = [p.image_grid_thw for p in prompts if p.image_grid_thw is not None]
    return torch.cat(pv, 0), torch.cat(grids, 0)


@dataclass
class PackedBatch:
    """The real tokens of a padded ``Batch`` back to back in one row: a padding-free forward.

    Each sequence keeps its own (m)rope positions; ``mmevo.models.attention`` keeps attention inside each sequence
    (varlen flash attention on CUDA, padded masked SDPA batches elsewhere), so the states equal the padded batch's.
    """

    input_ids: torch.Tensor  # [1, N] N = real tokens of the batch
    position_ids: torch.Tensor  # [3, 1, N] (VL) or [1, N] (text)
    pixel_values: torch.Tensor | None  # as in the padded batch (images keep their order)
    image_grid_thw: torch.Tensor | None
    # [B + 1] int32 on the CPU: where each sequence starts in the row (0 first, N last); kept on the host so that
    # every layer reads the bounds without a device sync (the varlen kernel gets its own device copy)
    cu_seqlens: torch.Tensor
    index: torch.Tensor  # [B, L] position in the row of each padded slot, -1 on padding

    def model_kwargs(self) -> dict:
        from mmevo.models.attention import PACKED_KWARG

        # a dict of per-layer-type masks is taken as given by transformers: None = no [N, N] mask is built
        kw = dict(input_ids=self.input_ids, position_ids=self.position_ids,
                  attention_mask={"full_attention": None, "sliding_attention": None},
                  **{PACKED_KWARG: self.cu_seqlens})
        if self.pixel_values is not None:
            kw.update(pixel_values=self.pixel_values, image_grid_thw=self.image_grid_thw)
        return kw


def pack(batch: Batch) -> PackedBatch:
    """Drop the padding of ``batch``: its real tokens row after row, with their positions and sequence bounds."""
    real = batch.attention_mask.bool()  # [B, L]
    n = int(real.sum())
    lengths = real.sum(-1)
    if bool((lengths == 0).any()):
        raise ValueError("pack: a sequence of the batch has no tokens")
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = lengths.cumsum(0).cpu()
    pos = batch.position_ids
    pos = pos[:, real].unsqueeze(1) if pos.dim() == 3 else pos[real].unsqueeze(0)
    index = torch.full(real.shape, -1, dtype=torch.long, device=real.device)
    index[real] = torch.arange(n, device=real.device)
    return PackedBatch(batch.input_ids[real].unsqueeze(0), pos, batch.pixel_values, batch.image_grid_thw, cu, index)


@dataclass
class SharedPackedBatch:
    """Samples that share prompts, padding-free: each distinct prompt's real tokens once, then every response, in
    one row. A response attends to its prompt's keys and then its own (``mmevo.models.attention``, ``PACKED_KV_KWARG``),
    so its states equal those of the padded [prompt | response] sequence, without running the prompt per sample."""

    packed: PackedBatch  # the row; ``index`` is unused (see ``predictors``)
    kv_index: torch.Tensor  # [N_k] row position of each segment's keys: a prompt's own; a response's prompt, then own
    cu_k: torch.Tensor  # [S + 1] int32 on the CPU: where each segment's keys start in kv_index
    predictors: torch.Tensor  # [B, R] row position of the state that predicts each response token, -1 past its end

    def model_kwargs(self) -> dict:
        from mmevo.models.attention import PACKED_KV_KWARG

        return {**self.packed.model_kwargs(), PACKED_KV_KWARG: (self.kv_index, self.cu_k)}


def distinct_prompts(prompts: Sequence[EncodedPrompt]) -> tuple[list[EncodedPrompt], list[int]]:
    """The distinct prompts (the same ``EncodedPrompt`` object = one GRPO group) in first-seen order, and the index
    in that list of each sample's prompt."""
    owner: dict[int, int] = {}
    uniq: list[EncodedPrompt] = []
    for p in prompts:
        if id(p) not in owner:
            owner[id(p)] = len(uniq)
            uniq.append(p)
    return uniq, [owner[id(p)] for p in prompts]


def pack_shared(model, prompts: Sequence[EncodedPrompt], responses: Sequence[Sequence[int]], pad_id: int,
                device: str | torch.device = "cpu") -> SharedPackedBatch:
    """Pack samples whose prompts repeat (the same ``EncodedPrompt`` object: one GRPO group) into one row.

    Prompt positions (mrope for images) come from the distinct prompts alone; response token t of a sample sits at its
    prompt's next text position + t, exactly where the padded [prompt | response] sequence puts it."""
    check_samples(prompts, responses)
    uniq, rows = distinct_prompts(prompts)
    pb = collate(model, uniq, None, pad_id, device)  # [U, P], left padded
    real = pb.attention_mask.bool()
    p_lens = real.sum(-1).tolist()
    p_start = [0, *accumulate(p_lens)]  # where each prompt starts in the row
    r_lens = [len(r) for r in responses]
    r_start = list(accumulate(r_lens, initial=p_start[-1]))  # where each response starts
    next_pos = pb.next_position.tolist()
    resp_ids = [t for r in responses for t in r]
    resp_pos = [next_pos[rows[i]] + t for i, n in enumerate(r_lens) for t in range(n)]
    input_ids = torch.cat([pb.input_ids[real], torch.tensor(resp_ids, dtype=torch.long, device=real.device)])
    resp_pos_t = torch.tensor(resp_pos, dtype=torch.long, device=real.device)
    if pb.position_ids.dim() == 3:  # mrope [3, U, P]: text tokens take the same position on all three axes
        pos = torch.cat([pb.position_ids[:, real], resp_pos_t[None].expand(3, -1)], 1).unsqueeze(1)  # [3, 1, N]
    else:
        pos = torch.cat([pb.position_ids[real], resp_pos_t]).unsqueeze(0)  # [1, N]
    # segments: the prompts, then the responses that have tokens
    seg_q = list(p_lens) + [n for n in r_lens if n]
    keys = [torch.arange(p_start[u], p_start[u + 1]) for u in range(len(uniq))]
    keys += [torch.cat([torch.arange(p_start[rows[i]], p_start[rows[i] + 1]), torch.arange(r_start[i], r_start[i + 1])])
             for i, n in enumerate(r_lens) if n]
    cu = torch.tensor([0, *accumulate(seg_q)], dtype=torch.int32)
    cu_k = torch.tensor([0, *accumulate(len(k) for k in keys)], dtype=torch.int32)
    R = max(1, max(r_lens))
    predictors = torch.full((len(responses), R), -1, dtype=torch.long)
    for i, n in enumerate(r_lens):
        if n:  # token 0 is predicted by the prompt's last state, token t by the response's token t - 1
            predictors[i, 0] = p_start[rows[i] + 1] - 1
            predictors[i, 1:n] = torch.arange(r_start[i], r_start[i] + n - 1)
    packed = PackedBatch(input_ids.unsqueeze(0), pos, pb.pixel_values, pb.image_grid_thw, cu,
                         index=torch.empty(0, dtype=torch.long))
    return SharedPackedBatch(packed, torch.cat(keys).to(real.device), cu_k, predictors.to(real.device))


@dataclass
class TrainBatch:
    """[left-padded prompt | right-padded response] sequences for log-prob computation."""

    batch: Batch
    response_ids: torch.Tensor  # [B, R]
    response_mask: torch.Tensor  # [B, R] 1 on real response tokens
    prompt_len: int  # P: width of the padded prompt block


def collate_for_training(model, prompts: Sequence[EncodedPrompt], responses: Sequence[Sequence[int]], pad_id: int,
                         device: str | torch.device = "cpu") -> TrainBatch:
    """Prompts left-padded to P, responses right-padded to R; positions computed over the real tokens of both."""
    check_samples(prompts, responses)
    _refuse_empty([p.input_ids for p in prompts], "prompt")
    P = max(len(p.input_ids) for p in prompts)
    R = max(1, max(len(r) for r in responses))
    B = len(prompts)
    input_ids = torch.full((B, P + R), pad_id, dtype=torch.long)
    mask = torch.zeros((B, P + R), dtype=torch.long)
    mm_types = torch.zeros((B, P + R), dtype=torch.long)
    resp_mask = torch.zeros((B, R), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        n = len(p.input_ids)
        input_ids[i, P - n:P] = torch.tensor(p.input_ids)
        mm_types[i, P - n:P] = torch.tensor(p.mm_token_type_ids)
        mask[i, P - n:P] = 1
        if len(r):
            input_ids[i, P:P + len(r)] = torch.tensor(list(r))
            mask[i, P:P + len(r)] = 1
            resp_mask[i, :len(r)] = 1
    pixel_values, grids = _stack_images(prompts)
    input_ids, mask, mm_types = input_ids.to(device), mask.to(device), mm_types.to(device)
    if grids is not None:
        grids, pixel_values = grids.to(device), pixel_values.to(device)
    pos, next_pos = compute_positions(model, input_ids, mask, mm_types, grids)
    batch = Batch(input_ids, mask, pos, pixel_values, grids, next_pos)
    return TrainBatch(batch, input_ids[:, P:], resp_mask.to(device), P)
