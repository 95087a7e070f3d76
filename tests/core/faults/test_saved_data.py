"""Saved data is never damaged: what a hostile user, a crash or a second process does to a run
directory, and what tinyscope must do about it (issue 20).

* checkpoints that load but are wrong (cast, NaN, a flipped byte, wrong shapes, missing or extra
  tensors, bad trainer metadata) are refused with one line naming the file, and nothing is
  overwritten; checkpoints written before the checksum existed still load;
* the same seed gives the same bytes (checkpoints, logs and results apart from timing fields);
* one writer per run directory: a second `tinyscope run` on it exits 2 naming the holder;
* a resume before the first resume checkpoint starts over with a clean log; the logged loss
  after a resume is the uninterrupted run's whatever log_every and checkpoint_every are;
* divergence stops with one line naming the step, keeps the last good checkpoint, and leaves
  valid JSON only in metrics.jsonl;
* leftovers: temporary files of killed writes, a missing report.html, a failed start that would
  block the corrected command, a missing best.safetensors at `eval`;
* kill -9 at random moments and in the middle of writes, for two experiments, resumed: the run
  ends bit for bit like an uninterrupted one.
"""
from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from tests.run_kill import kill_run
from tinyscope import cli
from tinyscope.errors import CheckpointError, ConfigError
from tinyscope.runs import lock as run_lock_module
from tinyscope.runs.lock import RunLockedError, holder, run_lock
from tinyscope.runs.registry import get
from tinyscope.runs.rundir import build, evaluate_run, load_run, run_experiment
from tinyscope.train import checkpoint as ckpt
from tinyscope.train.trainer import DivergedError, Trainer, json_record, read_log

PLE = "plus-last-even"
PLE_SET = ["train.threads=1", "train.log_every=30", "train.checkpoint_every=50"]  # 30 does not divide 50
TIMING = {"time", "wall_time", "eval_time"}


# ----------------------------------------------------------------------------- helpers
def records(run_dir: Path) -> list[dict]:
    """metrics.jsonl as strict JSON (a bare NaN or a torn line fails), timing fields removed."""
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in metrics.jsonl: not JSON"))
        out.append({k: v for k, v in rec.items() if k not in TIMING})
    return out


def results(run_dir: Path) -> dict:
    return {k: v for k, v in json.loads((run_dir / "results.json").read_text()).items() if k not in TIMING}


def snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file under ``run_dir`` (the lock file aside) and its bytes."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def checkpoint_bytes(run_dir: Path) -> dict[str, bytes]:
    return {k: v for k, v in snapshot(run_dir).items() if k.endswith(".safetensors")}


def temp_files(run_dir: Path) -> list[str]:
    return [str(p) for p in run_dir.rglob("*.tmp")]


def cli_run(argv: list[str], capsys) -> tuple[int, list[str]]:
    """``tinyscope ARGV`` in this process: exit code and the lines it wrote to stderr."""
    code = cli.main(argv)
    return code, [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


def one_error_line(lines: list[str]) -> str:
    """The single ``tinyscope: error:`` line of a failed command (no traceback, nothing else)."""
    errors = [ln for ln in lines if ln.startswith("tinyscope: error:")]
    assert len(errors) == 1 and not any("Traceback" in ln for ln in lines), lines
    return errors[0]


def kill_in_process(name: str, preset: str, seed: int, overrides: list[str], out: Path, step: int) -> None:
    """Start the run afresh in ``out`` and kill it (an exception) at its evaluation of ``step``."""
    kill_run(name, preset, seed, overrides, out, step)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An uninterrupted smoke run and the same run killed at step 200 (its resume checkpoint at
    step 200, best.safetensors, step checkpoints 0..200), written once for the module."""
    root = tmp_path_factory.mktemp("saved")
    run_experiment(PLE, "smoke", seed=5, overrides=PLE_SET, out=root / "full", progress=False, report="none")
    kill_in_process(PLE, "smoke", 5, PLE_SET, root / "killed", step=200)
    return root


@pytest.fixture
def partial(runs, tmp_path):
    out = tmp_path / "killed"
    shutil.copytree(runs / "killed", out)
    return out


def resume(out: Path, **kw) -> dict:
    return run_experiment(PLE, "smoke", seed=5, overrides=PLE_SET, out=out, resume=True, progress=False,
                          report="none", **kw)


# ----------------------------------------------------------------------------- corruptions
def _strip(meta: dict[str, str]) -> dict[str, str]:
    """The metadata without its checksum (as a file written before the checksum existed)."""
    inner = ckpt.decode_metadata(meta)
    inner.pop(ckpt.CHECKSUM_KEY, None)
    return ckpt.encode_metadata(inner)


def rewrite(path: Path, change, *, strip: bool = True, meta_change=None) -> None:
    """Load ``path`` with safetensors, change its tensors (and metadata), save it back, with the
    stored checksum (``strip=False``: now stale) or without it (a pre-checksum file)."""
    tensors = load_file(str(path))
    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata())
    tensors = change(tensors)
    if strip:
        meta = _strip(meta)
    if meta_change is not None:
        inner = ckpt.decode_metadata(meta)
        meta_change(inner)
        meta = ckpt.encode_metadata(inner)
    save_file(tensors, str(path), metadata=meta)


def _first_weight(tensors: dict) -> str:
    return sorted(k for k, v in tensors.items() if v.is_floating_point() and v.dim() == 2
                  and not k.startswith("optim."))[0]


def _cast(dtype):
    def change(t):
        k = _first_weight(t)
        return {**t, k: t[k].to(dtype)}
    return change


def _nan(t):
    k = _first_weight(t)
    bad = t[k].clone()
    bad.view(-1)[0] = float("nan")
    return {**t, k: bad}


def _reshape(t):
    k = _first_weight(t)
    return {**t, k: t[k].reshape(-1)}


def _drop(t):
    k = _first_weight(t)
    return {n: v for n, v in t.items() if n != k}


def _extra(t):
    return {**t, "model.extra.weight": torch.zeros(3)}


def _optim_cast(t):
    k = sorted(n for n in t if n.startswith("optim.") and n.endswith("exp_avg"))[0]
    return {**t, k: t[k].to(torch.float16)}


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-7] ^= 0x10  # in the last tensor's bytes
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _set_trainer(**kv):
    def change(meta):
        meta["trainer"].update(kv)
    return change


def _drop_trainer_key(key):
    def change(meta):
        meta["trainer"].pop(key)
    return change


RESUME_CORRUPTIONS = {
    "cast-float16-checksum-kept": lambda p: rewrite(p, _cast(torch.float16), strip=False),
    "cast-float16": lambda p: rewrite(p, _cast(torch.float16)),
    "cast-int64": lambda p: rewrite(p, _cast(torch.int64)),
    "nan-weight": lambda p: rewrite(p, _nan),
    "nan-weight-checksum-kept": lambda p: rewrite(p, _nan, strip=False),
    "flipped-byte": _flip_byte,
    "truncated": _truncate,
    "wrong-shape": lambda p: rewrite(p, _reshape),
    "missing-tensor": lambda p: rewrite(p, _drop),
    "extra-tensor": lambda p: rewrite(p, _extra),
    "optimizer-cast": lambda p: rewrite(p, _optim_cast),
    "trainer-step-negative": lambda p: rewrite(p, dict, meta_change=_set_trainer(step=-1)),
    "trainer-step-text": lambda p: rewrite(p, dict, meta_change=_set_trainer(step="200")),
    "trainer-step-beyond": lambda p: rewrite(p, dict, meta_change=_set_trainer(step=10_000)),
    "trainer-other-seed": lambda p: rewrite(p, dict, meta_change=_set_trainer(seed=6)),
    "trainer-no-selection": lambda p: rewrite(p, dict, meta_change=_drop_trainer_key("selection")),
    "trainer-bad-selection": lambda p: rewrite(p, dict, meta_change=_set_trainer(selection={"best_step": "x"})),
    "no-trainer": lambda p: rewrite(p, dict, meta_change=lambda m: m.pop("trainer")),
}

BEST_CORRUPTIONS = {
    "cast-float16-checksum-kept": lambda p: rewrite(p, _cast(torch.float16), strip=False),
    "cast-float16": lambda p: rewrite(p, _cast(torch.float16)),
    "nan-weight": lambda p: rewrite(p, _nan),
    "flipped-byte": _flip_byte,
    "wrong-shape": lambda p: rewrite(p, _reshape),
    "missing-tensor": lambda p: rewrite(p, _drop),
    "extra-tensor": lambda p: rewrite(p, _extra),
    "step-of-another-selection": lambda p: rewrite(p, dict, meta_change=lambda m: m.update(step=100)),
    "step-text": lambda p: rewrite(p, dict, meta_change=lambda m: m.update(step="x")),
}


@pytest.mark.parametrize("case", sorted(RESUME_CORRUPTIONS))
def test_a_bad_resume_checkpoint_is_named_in_one_line_and_nothing_is_overwritten(case, partial):
    path = partial / "checkpoints" / "resume.safetensors"
    RESUME_CORRUPTIONS[case](path)
    before = snapshot(partial)
    with pytest.raises(CheckpointError) as err:
        resume(partial)
    message = str(err.value)
    assert "resume.safetensors" in message and "\n" not in message, message
    assert snapshot(partial) == before  # no step checkpoint, best or log was touched


@pytest.mark.parametrize("case", sorted(BEST_CORRUPTIONS))
def test_a_bad_best_checkpoint_is_refused_on_resume_and_on_eval(case, partial):
    path = partial / "checkpoints" / "best.safetensors"
    BEST_CORRUPTIONS[case](path)
    before = snapshot(partial)
    with pytest.raises(CheckpointError, match="best.safetensors") as err:
        resume(partial)
    assert "\n" not in str(err.value)
    assert snapshot(partial) == before
    if case != "step-of-another-selection":  # a consistent file on its own: eval may load it
        with pytest.raises(CheckpointError, match="best.safetensors"):
            evaluate_run(partial)


def test_the_cli_names_a_bad_checkpoint_in_one_line_and_exits_2(partial, capsys):
    rewrite(partial / "checkpoints" / "resume.safetensors", _cast(torch.float16))
    code, lines = cli_run(["run", PLE, "--preset", "smoke", "--seed", "5", "--out", str(partial), "--resume",
                           "--no-progress"] + [a for s in PLE_SET for a in ("--set", s)], capsys)
    assert code == 2
    assert "resume.safetensors" in one_error_line(lines)


def test_a_checkpoint_is_checked_against_the_model_it_loads_into():
    model = torch.nn.Linear(3, 2)
    good = {k: v.clone() for k, v in model.state_dict().items()}
    for bad, why in [({**good, "weight": good["weight"].double()}, "float64"),
                     ({**good, "weight": good["weight"].T.contiguous()}, "shape"),
                     ({"weight": good["weight"]}, "missing bias"),
                     ({**good, "extra": torch.zeros(1)}, "unexpected extra")]:
        with pytest.raises(CheckpointError, match=why):
            ckpt.check_model_state("m.safetensors", bad, model)


def test_checkpoints_written_before_the_checksum_still_load(tmp_path):
    """The format before: one JSON-encoded metadata value per key, no checksum."""
    model = torch.nn.Linear(3, 2)
    path = tmp_path / "old.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path),
              metadata={"step": json.dumps(7), "metrics": json.dumps({"acc": 0.5})})
    fresh = torch.nn.Linear(3, 2)
    meta = ckpt.load_model(path, fresh)
    assert meta == {"step": 7, "metrics": {"acc": 0.5}}
    assert torch.equal(fresh.weight, model.weight)
    run = load_run(Path(__file__).resolve().parents[2] / "fixtures" / "premove-plus-last-even")
    assert run.step is not None


def test_the_checksum_covers_names_dtypes_shapes_and_bytes():
    t = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(2, dtype=torch.bfloat16),
         "c": torch.tensor([True, False]), "d": torch.zeros(())}
    base = ckpt.tensor_checksum(t)
    assert base == ckpt.tensor_checksum({k: t[k] for k in reversed(list(t))})  # order of the dict: no matter
    for other in [{**t, "a": t["a"].reshape(3, 2)}, {**t, "a": t["a"].double()}, {**t, "e": torch.zeros(0)},
                  {k: v for k, v in t.items() if k != "d"}, {**t, "d": torch.ones(())},
                  {("a2" if k == "a" else k): v for k, v in t.items()}]:
        assert ckpt.tensor_checksum(other) != base


# ----------------------------------------------------------------------------- same seed, same bytes
def test_metadata_is_written_in_one_order_every_time(tmp_path):
    """safetensors writes a metadata dict in a random key order (seen in 4 of 14 runs): one
    sorted JSON value makes the bytes the same."""
    t = {"w": torch.arange(4.0)}
    meta = {f"key{i}": {"n": i, "m": [i, str(i)]} for i in range(12)}
    blobs = set()
    for i in range(20):
        ckpt.save_tensors(tmp_path / f"{i}.safetensors", t, dict(reversed(list(meta.items())) if i % 2 else meta))
        blobs.add((tmp_path / f"{i}.safetensors").read_bytes())
    assert len(blobs) == 1


def test_two_identical_runs_write_the_same_bytes_apart_from_timing_fields(runs, tmp_path):
    again = tmp_path / "again"
    run_experiment(PLE, "smoke", seed=5, overrides=PLE_SET, out=again, progress=False, report="none")
    a, b = checkpoint_bytes(runs / "full"), checkpoint_bytes(again)
    assert len(a) >= 4 and a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    assert (runs / "full" / "config.json").read_bytes() == (again / "config.json").read_bytes()
    assert records(runs / "full") == records(again)
    assert results(runs / "full") == results(again)
    assert "wall_time" not in ckpt.load_tensors(again / "checkpoints" / "resume.safetensors")[1]["trainer"]


# ----------------------------------------------------------------------------- one writer
def _wait_for(cond, timeout: float = 60.0, what: str = "") -> None:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_the_lock_is_reentrant_in_one_process_and_refused_to_another(tmp_path):
    run_dir = tmp_path / "r"
    holder_code = ("import sys, time; from tinyscope.runs.lock import run_lock\n"
                   "with run_lock(sys.argv[1], 'tinyscope viz holder'):\n"
                   "    print('held', flush=True); time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", holder_code, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        rec = holder(run_dir)
        assert rec["pid"] == proc.pid and rec["command"] == "tinyscope viz holder"
        with pytest.raises(RunLockedError, match=rf"in use by process {proc.pid} \(tinyscope viz holder"):
            with run_lock(run_dir):
                pass
        proc.send_signal(signal.SIGKILL)  # a killed holder leaves its file, not its lock
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert holder(run_dir) is None
    with run_lock(run_dir, "first"):
        assert holder(run_dir) is None or holder(run_dir)["pid"] == os.getpid()
        with run_lock(run_dir, "nested"):  # the same process: allowed
            pass
        assert run_dir.resolve() in run_lock_module._held
    assert run_dir.resolve() not in run_lock_module._held


PAUSED_CLI = r"""
import json, sys, time
from pathlib import Path
from tinyscope import cli
from tinyscope.train import trainer as tr

marker, release, argv = json.loads(sys.argv[1])
real, seen = tr.Trainer._save_checkpoint, [0]


def paused(self):  # the first checkpoint waits until the test lets it go: the run is mid-training
    seen[0] += 1
    if seen[0] == 1:
        Path(marker).write_text("paused")
        while not Path(release).exists():
            time.sleep(0.05)
    return real(self)


tr.Trainer._save_checkpoint = paused
sys.exit(cli.main(argv))
"""


def test_a_second_run_on_a_busy_directory_exits_2_naming_the_first(tmp_path):
    out = tmp_path / "r"
    argv = ["run", PLE, "--preset", "smoke", "--seed", "5", "--out", str(out), "--no-progress", "--set", "train.threads=1"]
    marker, release = tmp_path / "paused", tmp_path / "release"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen([sys.executable, "-c", PAUSED_CLI, json.dumps([str(marker), str(release), argv])],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: marker.exists() or first.poll() is not None, 120, "the first run to train")
        second = subprocess.run([sys.executable, "-m", "tinyscope.cli"] + argv + ["--resume"], env=env,
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        lines = [ln for ln in second.stderr.splitlines() if ln.strip() and not ln.startswith("tinyscope: training")]
        line = one_error_line(lines)
        assert f"in use by process {first.pid} (" in line and "tinyscope" in line and len(lines) == 1, lines
        release.write_text("go")
        assert first.wait(timeout=300) == 0, first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
    steps = [r["step"] for r in records(out) if r["split"] == "train"]
    assert steps == [50, 100, 150, 200, 250, 300]


# ----------------------------------------------------------------------------- resume
def test_resume_before_the_first_resume_checkpoint_starts_over_with_a_clean_log(runs, tmp_path, caplog):
    over = PLE_SET + ["train.checkpoint_every=0"]  # only a final checkpoint
    full = tmp_path / "full"
    run_experiment(PLE, "smoke", seed=5, overrides=over, out=full, progress=False, report="none")
    out = tmp_path / "killed"
    kill_in_process(PLE, "smoke", 5, over, out, step=200)
    assert not (out / "checkpoints" / "resume.safetensors").exists() and len(records(out)) > 3
    with caplog.at_level(logging.WARNING):
        run_experiment(PLE, "smoke", seed=5, overrides=over, out=out, resume=True, progress=False, report="none")
    said = [r.getMessage() for r in caplog.records if "starting over" in r.getMessage()]
    assert len(said) == 1 and "step 0" in said[0]
    assert records(out) == records(full)
    assert results(out) == results(full)


def test_after_a_resume_the_logged_loss_is_the_uninterrupted_runs(runs, partial):
    """log_every=30 does not divide checkpoint_every=50: the loss summed since the last log
    record at step 180 is part of the step-200 resume checkpoint."""
    resume(partial)
    assert records(partial) == records(runs / "full")
    assert results(partial) == results(runs / "full")
    assert checkpoint_bytes(partial) == checkpoint_bytes(runs / "full")


def test_a_torn_last_log_line_is_dropped_and_a_bad_middle_line_is_named(runs, partial):
    path = partial / "metrics.jsonl"
    path.write_text(path.read_text() + '{"step": 210, "split": "tra')
    resume(partial)
    assert records(partial) == records(runs / "full")
    lines = path.read_text().splitlines()
    lines[2] = "{not json"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CheckpointError, match="line 3"):
        read_log(path)


# ----------------------------------------------------------------------------- divergence
def test_divergence_stops_naming_the_step_keeps_the_last_good_checkpoint_and_writes_json(tmp_path, capsys):
    out = tmp_path / "r"
    sets = ["train.lr=1e9", "train.checkpoint_every=1", "train.threads=1"]
    code, lines = cli_run(["run", PLE, "--preset", "smoke", "--out", str(out), "--no-progress"]
                          + [a for s in sets for a in ("--set", s)], capsys)
    assert code == 2
    line = one_error_line(lines)
    assert "diverged at step 2" in line and "last good checkpoint, step 1" in line, line
    assert not (out / "results.json").exists()
    recs = records(out)  # strict JSON
    assert recs[-1]["loss"] is None and recs[-1]["nonfinite"] == ["loss"] and recs[-1]["diverged"] is True
    state = ckpt.load_tensors(out / "checkpoints" / "resume.safetensors")[1]["trainer"]
    assert state["step"] == 1
    assert load_run(out, "last").step == 1  # the last good state loads (finite, checked)


def test_divergence_before_any_checkpoint_leaves_no_directory_behind(tmp_path):
    out = tmp_path / "r"
    with pytest.raises(DivergedError, match="diverged at step 2"):
        run_experiment(PLE, "smoke", seed=5, overrides=["train.lr=1e9", "train.threads=1"], out=out,
                       progress=False, report="none")
    assert not out.exists()
    run_experiment(PLE, "smoke", seed=5, overrides=["train.threads=1", "train.steps=20"], out=out,
                   progress=False, report="none")  # the corrected command is not blocked


def test_non_finite_numbers_are_logged_as_null_with_a_flag():
    rec = json_record({"step": 3, "split": "eval", "a": float("nan"), "b": 1.0, "c": float("-inf")})
    assert rec == {"step": 3, "split": "eval", "a": None, "b": 1.0, "c": None, "nonfinite": ["a", "c"]}
    json.dumps(rec, allow_nan=False)


def test_a_non_finite_selection_metric_is_divergence(tmp_path):
    exp = get(PLE)
    cfg = exp.config("smoke", 5, ["train.threads=1"])
    task, model = build(exp, cfg)
    trainer = Trainer(model, task, cfg.train, seed=5, run_dir=tmp_path, objective=exp.objective(cfg, task),
                      evaluate=lambda m: {"rule_error": float("nan"), "val_loss": 1.0}, progress=False)
    with pytest.raises(DivergedError, match="rule_error=nan"):
        trainer.fit()
    assert not (tmp_path / "checkpoints" / "best.safetensors").exists()
    assert records(tmp_path)[0]["nonfinite"] == ["rule_error"]


# ----------------------------------------------------------------------------- leftovers
def test_temporary_files_of_killed_writes_are_removed_on_the_next_start(runs, partial):
    leftovers = [partial / "checkpoints" / ".resume.safetensors.k1ll3d_x.tmp", partial / ".results.json.abcd1234.tmp",
                 partial / "checkpoints" / ".best.safetensors.zz99yy88.tmp"]
    for p in leftovers:
        p.write_bytes(b"half a file")
    keep = partial / "notes.tmp"  # not ours: kept
    keep.write_text("mine")
    resume(partial)
    assert temp_files(partial) == [str(keep)]
    assert results(partial) == results(runs / "full")


def test_a_run_killed_between_results_and_report_gets_its_report_on_resume(runs, tmp_path):
    out = tmp_path / "r"
    shutil.copytree(runs / "full", out)
    assert not (out / "report.html").exists()
    run_experiment(PLE, "smoke", seed=5, overrides=PLE_SET, out=out, resume=True, progress=False)
    assert (out / "report.html").stat().st_size > 0


def test_a_truncated_results_json_is_named_and_removing_it_measures_the_run_again(runs, tmp_path):
    out = tmp_path / "r"
    shutil.copytree(runs / "full", out)
    path = out / "results.json"
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(CheckpointError, match="results.json is not valid JSON"):
        resume(out)
    with pytest.raises(CheckpointError, match="results.json is not valid JSON"):
        assert load_run(out).results
    path.unlink()
    resume(out)  # the resume checkpoint is at the last step: only the final evaluation runs
    assert results(out) == results(runs / "full")


def test_a_loaded_runs_log_drops_a_torn_last_line(runs, tmp_path):
    out = tmp_path / "r"
    shutil.copytree(runs / "full", out)
    whole = load_run(out).metrics()
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"step": 301, "spl')
    assert load_run(out).metrics() == whole


def test_a_start_that_fails_late_leaves_nothing_that_blocks_the_corrected_command(tmp_path, capsys):
    out = tmp_path / "r"
    base = ["run", PLE, "--preset", "smoke", "--out", str(out), "--no-progress", "--set", "train.threads=1",
            "--set", "train.steps=20"]
    for bad in (["--set", "train.select_metric=rule_eror"], ["--set", "train.device=tpu"]):
        code, lines = cli_run(base + bad, capsys)
        assert code == 2, lines
        one_error_line(lines)
        assert not out.exists(), sorted(p.name for p in out.rglob("*"))
    if not torch.cuda.is_available():
        code, lines = cli_run(base + ["--set", "train.device=cuda"], capsys)
        assert code == 2 and "CUDA" in one_error_line(lines) and not out.exists()
    out.mkdir()  # a directory the user made, with a file of theirs: only what the run wrote goes
    (out / "notes.txt").write_text("mine")
    code, lines = cli_run(base + ["--set", "train.select_metric=rule_eror"], capsys)
    assert code == 2 and sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert cli_run(base, capsys)[0] == 0 and (out / "results.json").exists()


@pytest.mark.parametrize("resume_flag", [False, True])
def test_a_directory_left_by_a_killed_failed_start_is_started_afresh(tmp_path, resume_flag, caplog):
    """A start killed (no cleanup possible) before it trained a step, with another config."""
    out = tmp_path / "r"
    kill_in_process(PLE, "smoke", 5, ["train.threads=1", "train.lr=0.5"], out, step=0)
    assert (out / "config.json").exists()
    with caplog.at_level(logging.WARNING):
        res = run_experiment(PLE, "smoke", seed=5, overrides=["train.threads=1", "train.steps=20"], out=out,
                             resume=resume_flag, progress=False, report="none")
    assert res["steps"] == 20 and any("afresh" in r.getMessage() for r in caplog.records)


def test_a_run_that_trained_is_never_cleared_as_a_failed_start(partial):
    with pytest.raises(ConfigError, match="another config"):
        run_experiment(PLE, "smoke", seed=5, overrides=["train.threads=1"], out=partial, resume=True,
                       progress=False, report="none")
    with pytest.raises(ConfigError, match="already holds a run"):
        run_experiment(PLE, "smoke", seed=5, overrides=PLE_SET, out=partial, progress=False, report="none")
    assert (partial / "checkpoints" / "resume.safetensors").exists()


def test_eval_says_when_best_is_missing(runs, tmp_path, caplog):
    out = tmp_path / "r"
    shutil.copytree(runs / "full", out)
    (out / "checkpoints" / "best.safetensors").unlink()
    with caplog.at_level(logging.WARNING):
        res = evaluate_run(out)
    said = [r.getMessage() for r in caplog.records if "best.safetensors" in r.getMessage()]
    assert len(said) == 1 and "is missing" in said[0] and "step 300" in said[0], said
    assert res["step"] == 300


# ----------------------------------------------------------------------------- kill -9
CHILD = r"""
import json, os, sys, time
from pathlib import Path

name, seed, overrides, out, mode, n, marker = json.loads(sys.argv[1])


def hang(what):
    Path(marker).write_text(what)
    time.sleep(600)


if mode == "random":  # say when training starts: the kill comes a random moment later
    from tinyscope.train import trainer as tr

    real_fit = tr.Trainer.fit

    def fit(self):
        Path(marker).write_text("training")
        return real_fit(self)

    tr.Trainer.fit = fit
elif mode == "write":  # the n-th write of resume.safetensors: its temporary file written, not yet renamed
    real_replace, seen = os.replace, [0]

    def replace(src, dst, *a, **k):
        if str(dst).endswith("resume.safetensors"):
            seen[0] += 1
            if seen[0] == n:
                hang(str(src))
        return real_replace(src, dst, *a, **k)

    os.replace = replace
elif mode == "log":  # the n-th record of metrics.jsonl, cut in half
    from tinyscope.train import trainer as tr

    real_log, seen = tr.Trainer._log, [0]

    def _log(self, record):
        seen[0] += 1
        if seen[0] == n:
            line = json.dumps(tr.json_record(record))
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(line[: len(line) // 2])
            hang("log")
        return real_log(self, record)

    tr.Trainer._log = _log

from tinyscope.runs.rundir import run_experiment

run_experiment(name, "smoke", seed, overrides, out, resume=True, progress=False, report="none")
"""


def _child(tmp: Path, name: str, seed: int, overrides: list[str], out: Path, mode: str, n: int) -> tuple:
    marker = tmp / f"marker-{mode}-{n}"
    arg = json.dumps([name, seed, overrides, str(out), mode, n, str(marker)])
    proc = subprocess.Popen([sys.executable, "-c", CHILD, arg], env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, marker


def kill9_and_resume(tmp: Path, name: str, seed: int, overrides: list[str], plan: list[tuple[str, int]],
                     rng: random.Random, window: float) -> tuple[Path, list[str]]:
    """Run into ``tmp/killed`` and kill -9 it once per entry of ``plan``: ("random", _) after a
    random delay once training has started, ("write", n) while the n-th resume checkpoint is
    half written, ("log", n) with the n-th log record half written; then resume to the end."""
    out = tmp / "killed"
    what = []
    for mode, n in plan:
        proc, marker = _child(tmp, name, seed, overrides, out, mode, n)
        try:
            _wait_for(lambda m=marker, p=proc: m.exists() or p.poll() is not None, 120, f"the {mode} hook")
            if mode == "random":
                delay = rng.uniform(0, window)
                time.sleep(delay)
                what.append(f"random after {delay:.2f}s")
            else:
                what.append(f"{mode} #{n}")
            proc.send_signal(signal.SIGKILL)
            code = proc.wait(timeout=30)
            if code != -signal.SIGKILL:  # it finished (or failed) before the kill landed
                assert code == 0, proc.stderr.read().decode()[-2000:]
                what[-1] += " (had finished)"
        finally:
            if proc.poll() is None:
                proc.kill()
    run_experiment(name, "smoke", seed, overrides, out, resume=True, progress=False, report="none")
    return out, what


@pytest.mark.parametrize("name, seed, overrides, plan, window", [
    (PLE, 11, PLE_SET, [("random", 0), ("write", 2), ("log", 3)], 1.5),
    ("tracerelay-equal-repeats", 3, ["train.steps=60", "train.checkpoint_every=10", "train.log_every=4",
                                     "train.stop_metric=null"],
     [("write", 1), ("random", 0), ("log", 4)], 1.5),
], ids=["plus-last-even", "tracerelay-equal-repeats"])
def test_kill_9_at_random_moments_and_mid_write_then_resume_is_bit_equal(tmp_path, name, seed, overrides, plan,
                                                                       window):
    full = tmp_path / "full"
    run_experiment(name, "smoke", seed, overrides, full, progress=False, report="none")
    out, what = kill9_and_resume(tmp_path, name, seed, overrides, plan, random.Random(seed), window)
    assert temp_files(out) == [], what
    assert results(out) == results(full), what
    assert records(out) == records(full), what
    a, b = checkpoint_bytes(out), checkpoint_bytes(full)
    assert a.keys() == b.keys() and [k for k in a if a[k] != b[k]] == [], what
