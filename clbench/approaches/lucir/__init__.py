"""LUCIR (Hou et al. 2019): cosine-normalised heads, less-forget constraint, margin ranking on the memory.

`functions` holds the mathematics, `cosine` the cosine-normalised heads, `approach` the method (`LUCIR`). Nothing
here imports torch at import time (the registry imports `approach` by name).
"""
