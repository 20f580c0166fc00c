"""WSN with the authors' weight initialisation, for tools/authors_wsn.py's side by side (a plugin, not shipped).

clbench's bodies start from Xavier-uniform weights and zero biases (the HAT paper's, `clbench.nets.common`); the WSN
authors' layers keep torch's nn.Linear default (ihaeyong/WSN@f066982 networks/subnet.py:46 and mlp.py:19-20,30:
Kaiming uniform with a = sqrt(5), bound 1/sqrt(fan_in), about 2.3 times smaller than Xavier's on the 784-100
layer). This plugin re-draws the body's and heads' weights that way before masking, so that the side by side can
tell the method from the initialisation: `clbench train SPEC -m tools/authors_wsn_init.py:WSNTorchInit`.
"""

from __future__ import annotations

from torch import nn

from clbench.approaches.base import Approach
from clbench.approaches.wsn.approach import WSN
from clbench.approaches.wsn.masking import mask_layers


class WSNTorchInit(WSN):
    """`wsn` on a body whose Linear and Conv2d layers have torch's default initialisation."""

    name = "wsn-torch-init"
    summary = "wsn with torch's default layer initialisation (the WSN authors'), for the side by side"

    def build_network(self) -> nn.Module:
        network = Approach.build_network(self)
        for module in network.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                module.reset_parameters()
        self.gates = mask_layers(network, self.hparams.c)
        return network
