"""The experiments of this study as `tinyscope list` prints them, read without importing them
(generated from the registry by `python scripts/write_catalogs.py`; a test keeps it equal)."""
EXPERIMENTS = (
    ('circuit-arithmetic', ('smoke', 'cpu', 'paper'),
     'looped circuit transformer on arithmetic expressions (Ito et al.)'),
    ('circuit-arithmetic-baseline', ('smoke', 'cpu', 'paper'),
     "looped softmax transformer (learned PE) on arithmetic, the paper's baseline"),
    ('circuit-boolean', ('smoke', 'cpu', 'paper'),
     'looped circuit transformer on boolean expressions (Ito et al.)'),
    ('circuit-boolean-baseline', ('smoke', 'cpu', 'paper'),
     "looped softmax transformer (learned PE) on boolean, the paper's baseline"),
    ('circuit-listops', ('smoke', 'cpu', 'paper'),
     'looped circuit transformer on listops expressions (Ito et al.)'),
    ('circuit-listops-baseline', ('smoke', 'cpu', 'paper'),
     "looped softmax transformer (learned PE) on listops, the paper's baseline"),
)
