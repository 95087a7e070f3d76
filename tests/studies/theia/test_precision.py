"""THEIA's old ``bf16`` flag (before train.precision) still loads: True becomes bf16 autocast."""
from tinyscope.config import from_dict
from tinyscope.studies.theia.experiment import CHAIN_PRESETS, KLEENE_PRESETS, ChainRunConfig, KleeneRunConfig


def test_the_old_bf16_flag_maps_onto_train_precision():
    old = from_dict(KleeneRunConfig, {"bf16": True, "train": {"amp": True, "device": "cpu", "threads": 1}})
    assert (old.bf16, old.train.precision, old.train.threads) == (None, "bf16", 1)
    assert from_dict(ChainRunConfig, {"bf16": False, "train": {"amp": True, "device": "cpu"}}).train.precision == "fp32"
    for presets in (KLEENE_PRESETS, CHAIN_PRESETS):
        cpu = presets["cpu"]()
        assert (cpu.bf16, cpu.train.precision, cpu.train.threads) == (None, "auto", "auto")
