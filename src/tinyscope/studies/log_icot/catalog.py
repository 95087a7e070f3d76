"""The experiments of this study as `tinyscope list` prints them, read without importing them
(generated from the registry by `python scripts/write_catalogs.py`; a test keeps it equal)."""
EXPERIMENTS = (
    ('parity-cot', ('smoke', 'cpu', 'paper'),
     'k-parity with the explicit XOR-tree CoT'),
    ('parity-direct', ('smoke', 'cpu', 'paper'),
     'k-parity, answer only (no CoT)'),
    ('parity-icot', ('smoke', 'cpu', 'paper'),
     'k-parity, ICoT: one thinking token removed per stage'),
    ('parity-logicot', ('smoke', 'cpu', 'paper'),
     'k-parity, Log-ICoT: one tree level removed per stage'),
)
