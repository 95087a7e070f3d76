"""The experiments of this study as `tinyscope list` prints them, read without importing them
(generated from the registry by `python scripts/write_catalogs.py`; a test keeps it equal)."""
EXPERIMENTS = (
    ('ncffn-lm', ('smoke', 'cpu', 'paper'),
     'GPT with GELU vs NC-FFN (+ sequence quantifiers), licensing language or --set data.path'),
)
