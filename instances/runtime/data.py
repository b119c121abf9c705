"""Deterministic data-parallel sampling over token shards.

The token stream of all shard folders (concatenated in config order) is cut into non-overlapping
samples of ``seq_len + 1`` tokens (inputs + shifted targets; consecutive samples share one
boundary token). Each epoch visits every sample once in an order drawn from
``numpy.random.Generator(PCG64([seed, epoch]))``, independent of any global RNG.

One *micro-step* consumes ``micro_batch * dp_size`` consecutive entries of the epoch order; rank r
takes the slice ``[r * micro_batch, (r + 1) * micro_batch)``. A tail shorter than that is skipped and
the next epoch begins. The position ``(epoch, offset)`` is the same on every rank, is saved in
every checkpoint and restored on resume, so a resumed run sees exactly the samples the
uninterrupted run would have seen.

**Elastic jobs** (``global_batch`` given): one optimizer step consumes the next ``global_batch``
consecutive entries of the epoch order, split over the ranks' micro-steps as above, whatever the
data-parallel degree; the epoch's tail is skipped when shorter than ``global_batch`` (checked at step
boundaries only). The position is then a count of samples consumed in the *global* order, valid for
any degree that divides the global batch, so a job resumed on another degree continues at exactly the
next sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from instances.runtime.shards import ShardFormatError, ShardSet


@dataclass
class SamplerPosition:
    """Where the sampler stands: ``offset`` entries of epoch ``epoch``'s order are consumed."""

    epoch: int = 0
    offset: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset}

    @classmethod
    def from_dict(cls, raw: dict[str, int]) -> SamplerPosition:
        return cls(epoch=int(raw["epoch"]), offset=int(raw["offset"]))


class TokenSampler:
    """Yields ``(inputs, targets)`` int64 tensors of shape ``(micro_batch, seq_len)`` for one rank.

    Raises ``ShardFormatError`` when the folders disagree on vocabulary or hold fewer samples than
    one micro-step needs.
    """

    def __init__(
        self,
        folders: list[str],
        *,
        seq_len: int,
        micro_batch: int,
        dp_rank: int,
        dp_size: int,
        seed: int,
        global_batch: int = 0,
    ) -> None:
        self.sets = [ShardSet(f) for f in folders]
        vocab = {s.vocab_size for s in self.sets}
        if len(vocab) != 1:
            raise ShardFormatError(f"shard folders have different vocabularies: {sorted(vocab)}")
        self.vocab_size = vocab.pop()
        self.seq_len = seq_len
        self.micro_batch = micro_batch
        self.dp_rank = dp_rank
        self.dp_size = dp_size
        self.seed = seed
        # sample k of set j starts at token k * seq_len of that set
        self._counts = [max(0, (len(s) - 1) // seq_len) for s in self.sets]
        self._starts = np.cumsum([0, *self._counts])
        self.num_samples = int(self._starts[-1])
        self.per_step = micro_batch * dp_size
        self.global_batch = global_batch  # 0: not elastic (the position is valid for this degree only)
        if global_batch and global_batch % self.per_step:
            raise ValueError(f"global_batch {global_batch} is not a multiple of micro_batch * dp_size {self.per_step}")
        self._wrap = global_batch or self.per_step  # the epoch's tail is skipped in units of this
        if self.num_samples < self._wrap:
            raise ShardFormatError(
                f"data holds {self.num_samples} samples of {seq_len + 1} tokens; one "
                f"{'optimizer step' if global_batch else 'micro-step'} needs {self._wrap}"
            )
        self.taken: list[tuple[int, int, int]] = []  # (epoch, position, sample id) of this rank, since drain_taken
        self.position = SamplerPosition()
        self._order_epoch = -1
        self._order = np.empty(0, dtype=np.int64)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        if epoch != self._order_epoch:
            rng = np.random.Generator(np.random.PCG64([self.seed, epoch]))
            self._order = rng.permutation(self.num_samples)
            self._order_epoch = epoch
        return self._order

    def _sample(self, index: int) -> np.ndarray:
        j = int(np.searchsorted(self._starts, index, side="right") - 1)
        local = index - int(self._starts[j])
        return self.sets[j].tokens(local * self.seq_len, self.seq_len + 1)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Advance one micro-step; return this rank's ``(inputs, targets)``."""
        pos = self.position
        if pos.offset % self._wrap == 0 and pos.offset + self._wrap > self.num_samples:
            pos.epoch += 1
            pos.offset = 0
        order = self._epoch_order(pos.epoch)
        lo = pos.offset + self.dp_rank * self.micro_batch
        ids = [int(i) for i in order[lo : lo + self.micro_batch]]
        self.taken.extend((pos.epoch, lo + k, i) for k, i in enumerate(ids))
        rows = np.stack([self._sample(i) for i in ids])
        pos.offset += self.per_step
        batch = torch.from_numpy(rows)
        return batch[:, :-1].contiguous(), batch[:, 1:].contiguous()

    def drain_taken(self) -> list[tuple[int, int, int]]:
        """``(epoch, position in the epoch's global order, sample id)`` of every sample this rank took since
        the last call (the sample id indexes the concatenated sample space of all shard folders)."""
        taken, self.taken = self.taken, []
        return taken

    def state_dict(self) -> dict[str, int]:
        """Position plus the layout it is valid for (checked on load). ``global_batch`` is 0 for a job that
        is not elastic; ``per_step`` (samples per micro-step over all ranks) depends on the degree."""
        return {
            **self.position.to_dict(),
            "num_samples": self.num_samples,
            "per_step": self.per_step,
            "global_batch": self.global_batch,
            "seq_len": self.seq_len,
            "seed": self.seed,
        }

    def layout_keys(self, state: dict[str, int]) -> tuple[str, ...]:
        """The layout fields a saved position must share with this sampler to be resumed exactly: with an
        elastic batch on both sides the global batch (any degree), else the per-micro-step size (same degree)."""
        if self.global_batch and int(state.get("global_batch", 0)):
            return ("num_samples", "global_batch", "seq_len", "seed")
        return ("num_samples", "per_step", "seq_len", "seed")

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restore the position. Raises ``ValueError`` if the data layout differs from the checkpoint's."""
        for key in self.layout_keys(state):
            if int(state[key]) != getattr(self, key):
                raise ValueError(
                    f"sampler {key} is {getattr(self, key)} but the checkpoint was made with {state[key]}; "
                    "resuming would not see the same samples"
                )
        self.position = SamplerPosition.from_dict(state)
