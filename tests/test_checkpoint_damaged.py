"""A damaged (truncated / zeroed) checkpoint state file: resume stops with an error naming the file and the way out
(the previous checkpoint, or trainer.resume=false), not torch's internal zip / EOF / errno message."""

import pytest

from test_trainer_review3 import _cfg, _trainer, data  # noqa: F401  (the module-scoped data fixture)
from mmevo.grpo.checkpoint import DamagedCheckpointError, load_state_file


def _damage(path, how):
    raw = path.read_bytes()
    path.write_bytes({"empty": b"", "head": raw[:100], "half": raw[: len(raw) // 2], "zeros": bytes(len(raw))}[how])


@pytest.mark.parametrize("how", ["empty", "head", "half", "zeros"])
def test_a_damaged_trainer_state_names_the_file_and_the_previous_checkpoint(tiny_text_path, tmp_path, data, how):
    _trainer(_cfg(tmp_path, **{"trainer.steps": 2}), tiny_text_path, data).train()
    state = tmp_path / "checkpoints" / "step_000002" / "trainer_state.pt"
    _damage(state, how)
    tr = _trainer(_cfg(tmp_path, **{"trainer.steps": 3}), tiny_text_path, data)
    with pytest.raises(DamagedCheckpointError) as e:
        tr.maybe_resume()
    msg = str(e.value)
    assert f"checkpoint file {state} cannot be read" in msg
    assert f"delete {state.parent} to resume from step_000001" in msg and "trainer.resume=false" in msg
    # the way out it names works: without the damaged dir the run resumes from step 1
    import shutil

    shutil.rmtree(state.parent)
    tr = _trainer(_cfg(tmp_path, **{"trainer.steps": 3}), tiny_text_path, data)
    assert tr.maybe_resume() and tr.step_idx == 1


def test_a_damaged_only_checkpoint_and_a_non_dict_state(tmp_path):
    ckpt = tmp_path / "checkpoints" / "step_000004"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.pt").write_bytes(b"PK\x03\x04 cut")
    with pytest.raises(DamagedCheckpointError, match=rf"delete {ckpt}, or start afresh with trainer.resume=false"):
        load_state_file(ckpt / "trainer_state.pt")
    import torch

    torch.save([1, 2], ckpt / "trainer_state.pt")
    with pytest.raises(DamagedCheckpointError, match="holds a list, not a state dict"):
        load_state_file(ckpt / "trainer_state.pt")
    sft_state = tmp_path / "sft_state.pt"  # outside a step dir (SFT's resumable state)
    sft_state.write_bytes(b"")
    with pytest.raises(DamagedCheckpointError, match="delete it to start that run afresh"):
        load_state_file(sft_state)
