"""The replay family: experience replay, A-GEM, DER++ and iCaRL over one replay memory (`buffer.ReplayBuffer`).

Torch-free: the approaches are registered by name in `clbench.approaches.BUILTINS` and imported on first use.
"""
