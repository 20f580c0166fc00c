"""The seeding contract.

One run seed fixes everything random in a run, through independent streams derived from it by purpose:
`task-order`, `validation-split`, `subsample`, `permutations` (permuted tasks' pixel orders), `rotations`
(rotated tasks' angles), `init` (network weights and dropout), `batch-order`, `augment` (`data.augment`: each
training and replayed batch's crops and flips, drawn on the CPU), and approach-specific ones (e.g.
`random-classifier`, `pathnet-evolution`, `replay`). Because the
streams are independent, every approach sees the same task order, data split, subsample, batch order and
initial weights for a given seed (the paper: "All methods use the same task sequence, data split, batch
shuffle, and weight initialization for a given seed"). The same seed and config give identical results on
the same device.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch


def derive_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed for one purpose, derived from the run seed (stable across Python versions)."""
    digest = hashlib.sha256(f"clbench:{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def torch_generator(seed: int, purpose: str) -> torch.Generator:
    """A CPU torch generator for one purpose."""
    return torch.Generator().manual_seed(derive_seed(seed, purpose))


def numpy_generator(seed: int, purpose: str) -> np.random.Generator:
    """A numpy generator for one purpose."""
    return np.random.default_rng(derive_seed(seed, purpose))


def seed_global_torch(seed: int, purpose: str = "init") -> None:
    """Seed torch's global generator (weight initialisation and dropout draw from it).

    The one place clbench touches global RNG state; called explicitly at the start of a run.
    """
    torch.manual_seed(derive_seed(seed, purpose))
