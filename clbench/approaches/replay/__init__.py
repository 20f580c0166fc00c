"""The replay family: experience replay, A-GEM, DER++ and iCaRL over one replay memory (`buffer.ReplayBuffer`).

Torch-free: the approaches are listed in `clbench.approaches.BUILTINS` and imported when the registry loads.
"""
