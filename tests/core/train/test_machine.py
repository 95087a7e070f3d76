"""train/machine.py: precision and threads chosen by capability and measurement, and the
trainer's use of them (warm-up steps never change the result; a resume keeps the choice)."""
import pytest
import torch

from tinyscope.config import from_dict
from tinyscope.errors import ConfigError
from tinyscope.train import machine
from tinyscope.train.trainer import TrainConfig, Trainer

from .tiny import CountingTask, same, tiny_model, weights


def test_explicit_precision_is_kept_and_auto_follows_capability_and_timing(monkeypatch):
    assert machine.choose_precision("fp32", "cpu") == "fp32" and machine.choose_precision("bf16", "cpu") == "bf16"
    monkeypatch.setattr(machine, "bf16_native", lambda: False)
    assert machine.choose_precision("auto", "cpu") == "fp32"  # no native bf16: never, whatever a timing says
    monkeypatch.setattr(machine, "bf16_native", lambda: True)
    monkeypatch.setattr(machine, "bf16_matmul_speedup", lambda: 0.9)
    assert machine.choose_precision("auto", torch.device("cpu")) == "fp32"  # native but not faster
    monkeypatch.setattr(machine, "bf16_matmul_speedup", lambda: 4.0)
    assert machine.choose_precision("auto", "cpu") == "bf16"
    assert machine.precision_candidates("auto", "cpu", steps=10_000) == ("fp32", "bf16")
    assert machine.precision_candidates("auto", "cpu", steps=10) == ("fp32",)  # too short to measure: fp32
    with pytest.raises(ValueError):
        machine.choose_precision("fp16", "cpu")


def test_the_matmul_probe_is_measured_once_per_process():
    first = machine.bf16_matmul_speedup()
    assert first > 0 and machine.bf16_matmul_speedup() is first


def test_thread_cap_is_the_affinity_capped_by_omp_num_threads(monkeypatch):
    monkeypatch.setattr(machine, "cores", lambda: 4)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert machine.thread_cap() == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "16")
    assert machine.thread_cap() == 4
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert machine.thread_cap() == 4
    assert machine.thread_candidates("auto", steps=10_000) == (1, 2, 4)
    assert machine.thread_candidates("auto", steps=10) == (1,)  # a short run does not measure
    assert machine.thread_candidates("auto", steps=10_000, world=2) == (1,)
    assert machine.thread_candidates(3, steps=10) == (3,)


def test_more_threads_only_on_a_clear_win(monkeypatch):
    monkeypatch.setattr(machine, "thread_cap", lambda: 2)
    for t2, want in ((0.95, 1), (0.5, 2)):  # 5% faster is noise on a shared machine; 2x is not
        assert machine.choose_threads("auto", 10_000, lambda n, t2=t2: 1.0 if n == 1 else t2) == want
    assert machine.choose_threads(2, 10) == 2
    with pytest.raises(ValueError):
        machine.choose_threads("auto", 10_000)


def test_describe_names_what_a_run_would_use():
    line = machine.describe("fp32", 1, False, "cpu", 100)
    assert line == "precision fp32, threads 1, compile off, prefetch off"
    assert machine.describe("fp32", 1, False, "cpu", 100, prefetch="auto").endswith("prefetch off")  # too short to decide
    assert machine.describe("fp32", 1, False, "cpu", 5000, prefetch="auto").endswith(
        "prefetch on/off (the faster over the first steps)")


def test_prefetch_in_configs():
    assert TrainConfig().prefetch == "auto"
    assert from_dict(TrainConfig, {"prefetch": "false"}).prefetch is False
    assert from_dict(TrainConfig, {"prefetch": "auto"}).prefetch == "auto"
    with pytest.raises(ConfigError, match="train.prefetch"):
        from_dict(TrainConfig, {"prefetch": "sometimes"})


def test_threads_and_the_old_amp_flag_in_configs():
    assert TrainConfig().threads == "auto" and TrainConfig().precision == "auto"
    assert from_dict(TrainConfig, {"threads": " 2 "}).threads == 2
    for bad in ("two", "-1", "1.5", True):
        with pytest.raises(ConfigError, match="train.threads"):
            from_dict(TrainConfig, {"threads": bad})
    with pytest.raises(ConfigError, match="precision=.fp16. is not allowed"):
        from_dict(TrainConfig, {"precision": "fp16"})
    old = from_dict(TrainConfig, {"amp": True, "device": "cpu", "threads": 1})  # an old run's config.json
    assert (old.precision, old.amp, old.threads) == ("fp32", None, 1)
    assert from_dict(TrainConfig, {"amp": False}).precision == "fp32"


def _fit(cfg: TrainConfig, seed_model: int = 0):
    model, task = tiny_model(seed_model), CountingTask()
    trainer = Trainer(model, task, cfg, seed=3, progress=False)
    result = trainer.fit()
    return weights(model), task.drawn, result, trainer


def test_warmup_measurement_leaves_the_result_as_without_it(monkeypatch):
    """threads=auto with measuring forced on (two candidates) trains to the same bits as
    threads=1, and leaves torch's RNG (dropout) and the task's state as they were."""
    base = dict(steps=12, batch_size=16, eval_every=100, log_every=4, checkpoint_every=0, precision="fp32")
    plain, drawn, _, _ = _fit(TrainConfig(threads=1, **base))
    monkeypatch.setattr(machine, "AUTO_MIN_STEPS", 1)
    monkeypatch.setattr(machine, "thread_cap", lambda: 2)
    timed, drawn_timed, result, trainer = _fit(TrainConfig(threads="auto", **base))
    assert trainer.warmup_times and set(trainer.warmup_times) == {"fp32x1", "fp32x2"}
    assert same(plain, timed) and drawn == drawn_timed == 12
    assert result.machine["precision"] == "fp32" and result.machine["threads"] in (1, 2)


def test_a_thread_count_that_changes_gradient_bits_is_not_chosen(monkeypatch):
    monkeypatch.setattr(machine, "AUTO_MIN_STEPS", 1)
    monkeypatch.setattr(machine, "thread_cap", lambda: 2)
    monkeypatch.setattr(machine, "fastest", lambda times, order, margin=1: order[-1])  # "2 threads are faster"
    real = Trainer._loss

    def loss(self, model, batch, precision):  # gradients that depend on the thread count
        return real(self, model, batch, precision) * (1 + 1e-3 * (torch.get_num_threads() - 1))

    monkeypatch.setattr(Trainer, "_loss", loss)
    cfg = TrainConfig(steps=3, batch_size=8, eval_every=100, checkpoint_every=0, precision="fp32", threads="auto")
    assert _fit(cfg)[2].machine["threads"] == 1


def test_the_fastest_choice_is_judged_by_each_ones_fastest_round():
    """A neighbour's burst slows some rounds of a choice that is clearly faster: its best round
    still shows the win, where the median of three rounds would not."""
    times = {"fp32": [1.00, 1.02, 1.01], "bf16": [0.40, 1.6, 1.5]}  # bf16 2.5x, two rounds disturbed
    assert machine.fastest(times, ["fp32", "bf16"], margin=machine.PRECISION_CLEAR_WIN) == "bf16"
    close = {"fp32": [1.00, 1.02, 1.01], "bf16": [0.90, 0.95, 0.92]}  # 10%: under the margin, fp32 stays
    assert machine.fastest(close, ["fp32", "bf16"], margin=machine.PRECISION_CLEAR_WIN) == "fp32"
