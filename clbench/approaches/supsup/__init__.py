"""SupSup, Supermasks in Superposition (Wortsman et al., NeurIPS 2020): `approach`, `functions` (the maths),
`network` (the masked MLP), `report` (torch-free capacity report). Imports nothing, so that `report` loads without
torch."""
