"""The experiments of this study as `tinyscope list` prints them, read without importing them
(generated from the registry by `python scripts/write_catalogs.py`; a test keeps it equal)."""
EXPERIMENTS = (
    ('plus-last-even', ('smoke', 'cpu', 'paper'),
     '2-d minimal transformer on plus-last-even (Mahajne & Moldwin)'),
)
