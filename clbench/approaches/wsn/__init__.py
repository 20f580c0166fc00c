"""WSN, Winning SubNetworks (Kang et al., ICML 2022): `approach` (the method), `functions` (top-c masks,
straight-through, bit-packing), `masking` (the masked layers), `report` (the torch-free monitoring reporter).

Imports nothing, so that `clbench report` imports `report` without torch; the class is `approach.WSN`.
"""
