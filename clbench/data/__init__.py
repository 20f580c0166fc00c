"""Data: sources (download, verify, convert, cache) and task construction (mixture, split, permuted, rotated)."""
