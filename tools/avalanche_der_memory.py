"""Avalanche's DER with its memory changed one part at a time, for `tools/avalanche_splitmnist.py der --der-memory`
(issue 59: why Avalanche's DER diverges at DER++'s alpha 1 on seq-MNIST where Mammoth's and clbench's do not).

Avalanche 0.6.0's DER (`avalanche/training/supervised/der.py`) fills its class-balanced memory once per experience,
after training on it (`_after_training_exp`, line 258 -> `ClassBalancedBufferWithLogits.update`, line 93 ->
`compute_dataset_logits`, lines 37-56: the logits of the network at the experience's end, in eval mode), and replays
it from the next experience on (`_before_training_exp`, lines 239-252). The DER paper's code (Mammoth
`models/derpp.py` `observe`, `utils/buffer.py` reservoir) stores each batch after its step with the logits of that
step's forward pass, by reservoir sampling over the stream, and replays from the next step on. The variants:

- `avalanche`: Avalanche's DER as it is.
- `training-logits`: Avalanche's memory (class-balanced, filled at the experience's end, replayed from the next
  experience), each sample stored with the logits of the step that trained on it instead of the end's.
- `reservoir`: Mammoth's memory: a reservoir over the stream, each batch added after its step with that step's
  logits, replayed from the first step on.
- `reservoir-from-second`: as `reservoir`, but nothing replayed during the first experience (as in Avalanche).
- `reservoir-two-draws` (as a script only): as `reservoir`, with Mammoth's loss too: two independent memory batches
  per step, one for the logit matching, one for the replayed labels.

Only the memory changes: the loss stays Avalanche's (one forward pass over the memory batch joined to the current
one, the same memory batch for the logit matching and the replayed labels). Imported by the tool after avalanche.

Run as a script, it is `clbench` with `av-der`'s strategy replaced by one of the variants (the arguments after the
variant are clbench's; `--jobs 1`, so the replacement lives in the process, and a results folder of its own):

    python tools/avalanche_der_memory.py reservoir train mnist5 -m av-der --seeds 0-2 --jobs 1 --results OTHER ...
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from avalanche.training import DER
from avalanche.training.supervised import der as der_module
from torch.nn import functional

AVALANCHE_LOGITS = der_module.compute_dataset_logits


def input_key(x: torch.Tensor) -> str:
    """A sample's input, as a dictionary key (its bytes' hash)."""
    return hashlib.blake2b(x.contiguous().numpy().tobytes(), digest_size=16).hexdigest()


class TrainingLogitsDER(DER):
    """Avalanche's DER whose memory stores each sample's logits from the forward pass that trained on it (the
    current batch's outputs, detached), looked up by the sample's input when the memory is updated."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen_logits: dict[str, torch.Tensor] = {}

    def _after_forward(self, **kwargs: Any) -> None:
        super()._after_forward(**kwargs)
        start = self.batch_size_mem if self.replay_loader is not None else 0
        for x, out in zip(self.mb_x[start:], self.mb_output[start:].detach()):
            self.seen_logits[input_key(x)] = out.clone()

    def _after_training_exp(self, **kwargs: Any) -> None:
        def training_logits(dataset: Any, *args: Any, **_: Any) -> list[torch.Tensor]:
            return [self.seen_logits[input_key(dataset[i][0])] for i in range(len(dataset))]

        der_module.compute_dataset_logits = training_logits  # what ClassBalancedBufferWithLogits.update calls
        try:
            super()._after_training_exp(**kwargs)
        finally:
            der_module.compute_dataset_logits = AVALANCHE_LOGITS
        self.seen_logits = {}


class ReservoirDER(DER):
    """Avalanche's DER with Mammoth's memory: a reservoir over the stream (`utils/buffer.py` reservoir), each
    batch added after its step with the logits of that step's forward pass, replayed from the next step on (or,
    `from_second`, only from the second experience on)."""

    def __init__(self, *, from_second: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.from_second = from_second
        self.memory: list[tuple[torch.Tensor, ...]] = []  # (x, y, task, logits) per sample
        self.seen = 0
        self.generator = torch.Generator().manual_seed(0)
        self.current = 0
        self.draws = 1  # memory batches per step: 1 (Avalanche's loss) or 2 (ReservoirTwoDrawsDER)

    def _before_training_exp(self, **kwargs: Any) -> None:
        super(DER, self)._before_training_exp(**kwargs)  # not DER's: no loader over Avalanche's memory

    def _after_training_exp(self, **kwargs: Any) -> None:
        super(DER, self)._after_training_exp(**kwargs)  # not DER's: no update at the experience's end

    def _before_forward(self, **kwargs: Any) -> None:
        super(DER, self)._before_forward(**kwargs)
        self.current = len(self.mbatch[0])
        first = self.from_second and self.clock.train_exp_counter == 0
        if len(self.memory) < self.batch_size_mem or first:
            self.replay_loader = None  # DER.training_epoch: the plain loss
            return
        drawn = torch.randperm(len(self.memory), generator=self.generator)[: self.batch_size_mem].tolist()
        if self.draws == 2:  # a second, independent draw for the replayed labels (Mammoth's observe)
            drawn += torch.randperm(len(self.memory), generator=self.generator)[: self.batch_size_mem].tolist()
        x, y, task, logits = (torch.stack(column) for column in zip(*(self.memory[i] for i in drawn)))
        self.replay_loader = True  # DER.training_epoch only asks whether it is None
        self.mbatch[0], self.mbatch[1] = torch.cat((x, self.mbatch[0])), torch.cat((y, self.mbatch[1]))
        self.mbatch[2] = torch.cat((task, self.mbatch[2]))
        self.batch_logits = logits[: self.batch_size_mem]

    def _after_update(self, **kwargs: Any) -> None:
        super()._after_update(**kwargs)
        start = len(self.mbatch[0]) - self.current
        batch = zip(self.mbatch[0][start:], self.mbatch[1][start:], self.mbatch[2][start:],
                    self.mb_output[start:].detach())
        for x, y, task, out in batch:
            self.add((x, y, task, out.clone()))

    def add(self, sample: tuple[torch.Tensor, ...]) -> None:
        """Reservoir sampling (Mammoth `utils/buffer.py` `reservoir`)."""
        if len(self.memory) < self.mem_size:
            self.memory.append(sample)
        else:
            slot = int(torch.randint(0, self.seen + 1, (1,), generator=self.generator))
            if slot < self.mem_size:
                self.memory[slot] = sample
        self.seen += 1


class ReservoirFromSecondDER(ReservoirDER):
    """`ReservoirDER(from_second=True)`, as a class (clbench's adapter builds a strategy from its class)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(from_second=True, **kwargs)


class ReservoirTwoDrawsDER(ReservoirDER):
    """`ReservoirDER` with Mammoth's loss too: the logit matching on one memory batch and the replayed labels on a
    second, independent one (Mammoth `models/derpp.py` `observe`: two `buffer.get_data` calls), each term its own
    mean, in one forward pass over [first memory batch, second, current batch]."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.draws = 2

    def training_epoch(self, **kwargs: Any) -> None:
        """Avalanche's `DER.training_epoch` (der.py lines 278-334) with the loss's three terms on three slices."""
        for batch in self.dataloader:
            self.mbatch = batch
            if self._stop_training:
                break
            self._unpack_minibatch()
            self._before_training_iteration(**kwargs)
            self.optimizer.zero_grad()
            self.loss = self._make_empty_loss()
            self._before_forward(**kwargs)
            self.mb_output = self.forward()
            self._after_forward(**kwargs)
            if self.replay_loader is not None:
                m = self.batch_size_mem
                out, y = self.mb_output, self.mb_y
                self.loss += functional.cross_entropy(out[2 * m:], y[2 * m:])
                self.loss += self.alpha * functional.mse_loss(out[:m], self.batch_logits)
                self.loss += self.beta * functional.cross_entropy(out[m:2 * m], y[m:2 * m])
            else:
                self.loss += self.criterion()
            self._before_backward(**kwargs)
            self.backward()
            self._after_backward(**kwargs)
            self._before_update(**kwargs)
            self.optimizer_step()
            self._after_update(**kwargs)
            self._after_training_iteration(**kwargs)


def der_strategy(memory: str, **kwargs: Any) -> DER:
    """Avalanche's DER with the memory MEMORY (the module's doc), built with KWARGS (DER's own)."""
    if memory == "avalanche":
        return DER(**kwargs)
    if memory == "training-logits":
        return TrainingLogitsDER(**kwargs)
    return ReservoirDER(from_second=memory == "reservoir-from-second", **kwargs)


if __name__ == "__main__":
    import sys

    import avalanche.training

    variant = sys.argv.pop(1)
    variants = {"training-logits": TrainingLogitsDER, "reservoir": ReservoirDER,
                "reservoir-from-second": ReservoirFromSecondDER, "reservoir-two-draws": ReservoirTwoDrawsDER}
    if variant not in variants:
        raise SystemExit(f"the variant {variant!r}: one of {', '.join(variants)}")
    avalanche.training.DER = variants[variant]
    from clbench.cli import console_main

    console_main()
