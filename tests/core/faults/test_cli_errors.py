"""One line, exit 2, never a traceback (issue 20): the bad inputs a demanding user gives the CLI.

The traceback detector runs every case as its own process (forked from one driver process that
imported torch and tinyscope once, so that forty processes cost seconds, not minutes) and fails
when a case exits with anything but 2, prints more than one line to stderr, or prints a
traceback. A process killed by a signal (the segfault of ``train.threads=100000``, the
out-of-memory kill of a billion-example batch) fails it too. Cases that must succeed despite a
damaged file (a torn last line of metrics.jsonl, one truncated results.json in a folder of runs)
must exit 0 and print at most the one warning line naming what they skipped.

A genuine bug may still raise: then the CLI prints one line naming the log file that holds the
traceback (in the run directory when there is one), exits 1, and the log holds the traceback.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
ZOO_RUN = ROOT / "zoo" / "plus-last-even-cpu"  # a trained run directory: no training in these tests
SMOKE = ["--preset", "smoke"]

# The driver: run each case's argv through tinyscope.cli.main in a forked child, stdout and
# stderr to files; a case may first break one function ("bug") to stand for an internal bug.
DRIVER = r'''
import json, os, sys, tempfile, time
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: F401
import tinyscope.commands.core, tinyscope.report.sweep_report, tinyscope.interp.mpl  # noqa: F401
from tinyscope.cli import build_parser, main
from tinyscope.runs import registry
registry.names(); build_parser()
cases, limit = json.load(open(sys.argv[1])), float(sys.argv[2])

def bug(name):
    module, attr = name.rsplit(".", 1)
    import importlib
    def broken(*a, **k):
        return {}["an internal bug"]
    setattr(importlib.import_module(module), attr, broken)

results = []
for case in cases:
    out_fd, out_path = tempfile.mkstemp()
    err_fd, err_path = tempfile.mkstemp()
    pid = os.fork()
    if pid == 0:
        os.dup2(out_fd, 1); os.dup2(err_fd, 2)
        try:
            if case.get("bug"):
                bug(case["bug"])
            code = main(case["argv"])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            import traceback; traceback.print_exc(); code = 99
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(int(code or 0))
    t0 = time.time()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            rc = os.waitstatus_to_exitcode(status)
            break
        if time.time() - t0 > limit:
            os.kill(pid, 9); os.waitpid(pid, 0); rc = "timeout"
            break
        time.sleep(0.02)
    out, err = open(out_path, errors="replace").read(), open(err_path, errors="replace").read()
    for fd, p in ((out_fd, out_path), (err_fd, err_path)):
        os.close(fd); os.unlink(p)
    results.append({"argv": case["argv"], "rc": rc, "stdout": out, "stderr": err, "wall": time.time() - t0})
json.dump(results, sys.stdout)
'''


def drive(cases: list[dict], tmp_path: Path, limit: float = 120.0) -> list[dict]:
    """Run ``cases`` (``{"argv": [...], "bug": optional "module.function"}``) through the driver."""
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="default")
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(spec), str(limit)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60 + limit * len(cases))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Run directories and files for the cases: a trained run, damaged copies, a file, a folder."""
    tmp = tmp_path_factory.mktemp("cli")
    run = tmp / "run"
    shutil.copytree(ZOO_RUN, run)
    (run / "afile").write_text("not a directory\n")
    for name in ("noexp", "empty", "notjson", "badvalue", "binary", "wider"):
        shutil.copytree(ZOO_RUN, tmp / "cfg" / name)
    record = json.loads((run / "config.json").read_text())
    (tmp / "cfg" / "noexp" / "config.json").write_text(json.dumps({k: v for k, v in record.items() if k != "experiment"}))
    (tmp / "cfg" / "empty" / "config.json").write_text("{}")
    (tmp / "cfg" / "notjson" / "config.json").write_text((run / "config.json").read_text()[:40])
    bad = json.loads(json.dumps(record))
    bad["config"]["model"]["d_model"] = "wide"
    (tmp / "cfg" / "badvalue" / "config.json").write_text(json.dumps(bad))
    (tmp / "cfg" / "binary" / "config.json").write_bytes(b"\xff\xfe\x00garbage" * 10)
    wider = json.loads(json.dumps(record))  # a config that no longer matches the weights
    wider["config"]["model"]["d_model"] = record["config"]["model"]["d_model"] * 2
    (tmp / "cfg" / "wider" / "config.json").write_text(json.dumps(wider))
    clean = tmp / "clean"  # two seeds, nothing damaged but a sweep.json cut short
    for seed in (1, 2):
        d = clean / f"s{seed}"
        shutil.copytree(ZOO_RUN, d)
        rec = json.loads((d / "config.json").read_text())
        rec["config"]["seed"] = seed
        (d / "config.json").write_text(json.dumps(rec))
    (clean / "sweep.json").write_text('{"experiment": "plus-last-even", "grid": {"train')
    folder = tmp / "folder"  # three seeds of one setting; one results.json cut short
    for seed in (1, 2, 3):
        d = folder / f"s{seed}"
        shutil.copytree(ZOO_RUN, d)
        rec = json.loads((d / "config.json").read_text())
        rec["config"]["seed"] = seed
        (d / "config.json").write_text(json.dumps(rec))
    text = (folder / "s2" / "results.json").read_text()
    (folder / "s2" / "results.json").write_text(text[: len(text) // 2])
    torn = tmp / "torn"
    shutil.copytree(ZOO_RUN, torn)
    (torn / "metrics.jsonl").write_text(json.dumps({"step": 0, "loss": 1.0, "tokens": 0}) + "\n" + '{"step": 10, "lo')
    sqlite = tmp / "badindex"
    shutil.copytree(ZOO_RUN, sqlite / "r")
    (sqlite / "index.sqlite").write_bytes(b"this is not a database" * 40)
    readonly = tmp / "readonly"
    readonly.mkdir()
    readonly.chmod(0o555)
    return {"tmp": tmp, "run": run, "folder": folder, "torn": torn, "readonly": readonly, "badindex": sqlite,
            "clean": clean}


def bad_inputs(w: dict) -> dict[str, list[list[str]]]:
    """Every user-caused error, by kind: each must exit 2 with one line."""
    tmp, run = w["tmp"], str(w["run"])
    out = str(tmp / "new")
    ple = ["run", "plus-last-even", *SMOKE, "--out", out]
    unwritable = f"{w['readonly']}/x" if os.geteuid() != 0 else "/proc/tinyscope-cannot-write-here"
    cases = {
        "number conversion": [
            ple + ["--set", "train.steps=nan"], ple + ["--set", "train.steps=inf"], ple + ["--set", "train.steps=1e400"],
            ple + ["--set", "train.steps=3.5"], ple + ["--set", "model.d_model=abc"], ple + ["--set", "train.lr=nan"],
            ple + ["--set", "train.betas=[0.9,nan]"], ple + ["--set", "train.steps=" + "9" * 30],
            ["run", "tracerelay-dyck", *SMOKE, "--out", out, "--set", "model.d_model=inf"],
        ],
        "seeds": [
            ple + ["--seed", "-1"], ple + ["--seed", "99999999999999999999999"], ["eval", run, "--seed", "-3"],
            ["analyze", run, "--seed", "-1"], ["sweep", "plus-last-even", *SMOKE, "--seeds", "-1", "--out", out],
        ],
        "device": [ple + ["--set", "train.device=cuda:99"], ple + ["--set", "train.device=gpu"]]
        + ([] if torch.cuda.is_available() else [ple + ["--set", "train.device=cuda"]]),
        "meaningless floats": [ple + ["--set", "model.init_std=nan"], ple + ["--set", "train.stop_threshold=nan"],
                               ple + ["--set", "train.stop_threshold=-inf"]],
        "absurd sizes": [
            ple + ["--set", "model.d_model=10000000"], ple + ["--set", "train.batch_size=1000000000"],
            ["run", "tracerelay-dyck", *SMOKE, "--out", out, "--set", "train.batch_size=1000000000"],
            ["sweep", "plus-last-even", *SMOKE, "--out", out, "--grid", "train.batch_size=8,1000000000"],
        ],
        "threads": [ple + ["--set", "train.threads=100000"], ["analyze", run, "--threads", "100000"],
                    ["sweep", "plus-last-even", *SMOKE, "--threads", "100000", "--out", out]],
        "--out": [ple[:-1] + [str(w["run"] / "afile")], ple[:-1] + [str(w["run"] / "afile" / "sub")],
                  ple[:-1] + [unwritable]],
        "eval": [["eval", run, "--checkpoint", "foo"], ["eval", run, "--checkpoint", "-1"],
                 ["eval", run, "--checkpoint", "999"], ["eval", run, "--n", "0"], ["eval", str(tmp / "missing")]],
        "viz": [["viz", run, "--head", "-1"], ["viz", run, "--head", "99", "--only", "embeddings"],
                ["viz", run, "--focus-position", "-5"],
                ["viz", run, "--focus-position", "100000", "--only", "07_qk_space_focused_query"],
                ["viz", run, "--dpi", "0"], ["viz", run, "--dpi", "100000"],
                ["viz", run, "--focus", "x", "--only", "08_query_token_scores"], ["viz", run, "--only", "nosuchview"]],
        "config.json": [["eval", str(tmp / "cfg" / n)] for n in ("noexp", "empty", "notjson", "badvalue", "binary", "wider")]
        + [["viz", str(tmp / "cfg" / "notjson")], ["analyze", str(tmp / "cfg" / "binary")]],
        "folders": [["runs", str(tmp / "missing")], ["runs", run, "--where", "no such column"],
                    ["runs", run, "--order", "nosuch"], ["runs", run, "--columns", "nosuch"],
                    ["runs", str(w["badindex"])], ["report", str(tmp / "cfg" / "empty" / "checkpoints")],
                    ["report", str(w["clean"]), "--table", "nosuch"], ["report", str(w["clean"])]],
        "movie": [["movie", run, "--fps", "0"], ["movie", run, "--fps", "nan"], ["movie", run, "--every", "0"],
                  ["movie", run, "--dpi", "0"]],
        "sweep": [["sweep", "plus-last-even", *SMOKE, "--jobs", "0", "--out", out],
                  ["sweep", "plus-last-even", *SMOKE, "--grid", "train.lr=nan,1e-3", "--out", out],
                  ["sweep", "plus-last-even", *SMOKE, "--grid", "train.lr", "--out", out]],
        "other commands": [["construct", "eca", "--grid", "-5", "--out", out], ["construct", "eca", "--beta", "nan", "--out", out],
                           ["claims", "nosuch"], ["reproduce", "minimal", "--n-seeds", "0", "--dry-run"],
                           ["zoo", "path", "nosuch"], ["frobnicate"]],
    }
    return cases


def tolerated(w: dict) -> list[list[str]]:
    """Commands that must succeed although a file they read is damaged."""
    folder, torn = str(w["folder"]), str(w["torn"])
    return [["runs", folder], ["runs", folder, "--format", "json"], ["report", folder], ["eval", torn], ["runs", torn],
            ["viz", torn, "--only", "03_learning_curve", "--no-report"]]


def _index_with(folder: Path, rows: list[tuple[str, int]]) -> None:
    from tinyscope.sweep.index import RunIndex

    with RunIndex(folder) as index:
        for rel, pid in rows:
            index.register(rel, "plus-last-even", "smoke", 0, [])
            index.mark_running(rel, pid=pid)


@pytest.fixture(scope="module")
def outcome(world):
    """Every case of this module through one driver (one start of torch, not one per test)."""
    tmp = world["tmp"]
    bug_run = tmp / "bugrun"
    shutil.copytree(ZOO_RUN, bug_run)
    plain, scanned, sweep = tmp / "plain", tmp / "scanned", tmp / "sweep"
    shutil.copytree(ZOO_RUN, plain / "a")
    shutil.copytree(ZOO_RUN, scanned / "a")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    _index_with(sweep, [("runs/killed/s0", dead.pid), ("runs/live/s0", alive.pid)])
    bad = [(kind, argv) for kind, argvs in bad_inputs(world).items() for argv in argvs]
    cases = [{"argv": argv, "kind": kind} for kind, argv in bad]
    cases += [{"argv": argv, "kind": "tolerated"} for argv in tolerated(world)]
    cases += [{"argv": ["list"], "bug": "tinyscope.commands.core.cmd_list", "kind": "bug"},
              {"argv": ["eval", str(bug_run)], "bug": "tinyscope.commands.core.cmd_eval", "kind": "bug"}]
    cases += [{"argv": ["runs", str(sweep), "--format", "json"], "kind": "index"},
              {"argv": ["runs", str(sweep), "--where", "status = 'running'", "--format", "csv"], "kind": "index"},
              {"argv": ["runs", str(plain)], "kind": "index"}, {"argv": ["runs", str(scanned), "--scan"], "kind": "index"}]
    before = sorted(str(p) for p in plain.rglob("*"))
    t0 = time.time()
    try:
        results = drive(cases, tmp)
    finally:
        alive.kill()
        alive.wait()
    return {"cases": cases, "results": results, "wall": time.time() - t0, "plain": plain, "plain_before": before,
            "scanned": scanned, "sweep": sweep, "bug_run": bug_run}


def of_kind(outcome: dict, kind: str) -> list[tuple[dict, dict]]:
    return [(c, r) for c, r in zip(outcome["cases"], outcome["results"]) if c["kind"] == kind]


def by_argv(outcome: dict, *argv: str) -> dict:
    return next(r for c, r in zip(outcome["cases"], outcome["results"]) if c["argv"] == list(argv))


def test_every_user_caused_error_is_one_line_and_exit_2(world, outcome):
    failures, tried = [], 0
    for case, r in zip(outcome["cases"], outcome["results"]):
        if case["kind"] in ("tolerated", "bug", "index"):
            continue
        tried += 1
        err = lines(r["stderr"])
        ok = (r["rc"] == 2 and len(err) == 1 and err[0].startswith("tinyscope: error: ")
              and "internal error" not in err[0] and "Traceback" not in r["stderr"])
        if not ok:
            failures.append(f"[{case['kind']}] tinyscope {' '.join(case['argv'])}\n  -> exit {r['rc']}, stderr "
                            f"({len(err)} lines): {r['stderr'][-600:]!r}")
    assert tried >= 70
    assert not failures, f"{len(failures)} of {tried} cases broke the rule:\n" + "\n".join(failures)
    assert not (world["tmp"] / "new").exists(), "a refused run left a directory behind"
    assert outcome["wall"] < 300


def test_a_damaged_file_in_a_folder_or_a_run_is_tolerated_with_one_warning(world, outcome):
    folder, torn = str(world["folder"]), str(world["torn"])
    for case, r in of_kind(outcome, "tolerated"):
        argv, err = case["argv"], lines(r["stderr"])
        assert r["rc"] == 0 and "Traceback" not in r["stderr"], (argv, r["rc"], r["stderr"][-1500:])
        if argv[1] == folder:
            assert err[0].startswith("tinyscope: warning: skipped run") and "s2" in err[0], err
            assert not any(e.startswith("tinyscope: error") for e in err), err
            if argv[0] == "runs":
                assert len(err) == 1 and "s1" in r["stdout"] and "s3" in r["stdout"] and "s2" not in r["stdout"]
        else:  # at most a warning that the torn line was dropped
            assert len(err) <= 1 and all(e.startswith("tinyscope: warning: ") for e in err), err
    assert "plus-last-even" in by_argv(outcome, "runs", torn)["stdout"]  # listed; its torn line is ignored
    assert [row["seed"] for row in json.loads(by_argv(outcome, "runs", folder, "--format", "json")["stdout"])] == [1, 3]


def test_an_internal_bug_prints_one_line_naming_the_log_that_holds_the_traceback(outcome):
    for case, r in of_kind(outcome, "bug"):
        err = lines(r["stderr"])
        assert r["rc"] == 1 and len(err) == 1, (case, r)
        assert "internal error, KeyError" in err[0] and "the full traceback is in " in err[0], err
        log = Path(err[0].split("the full traceback is in ")[1].split(" (a bug")[0])
        text = log.read_text()
        assert "Traceback (most recent call last)" in text and "an internal bug" in text
    assert by_argv(outcome, "eval", str(outcome["bug_run"]))["stderr"].count(
        str(outcome["bug_run"] / "cli-errors.log")) == 1  # in the run directory


def test_runs_shows_a_killed_sweeps_job_as_incomplete_and_a_live_one_as_running(outcome):
    sweep = str(outcome["sweep"])
    rows = {r["path"]: r for r in json.loads(by_argv(outcome, "runs", sweep, "--format", "json")["stdout"])}
    assert rows["runs/killed/s0"]["status"] == "incomplete" and "ended without finishing" in rows["runs/killed/s0"]["error"]
    assert rows["runs/live/s0"]["status"] == "running"
    running = by_argv(outcome, "runs", sweep, "--where", "status = 'running'", "--format", "csv")["stdout"]
    assert "runs/live/s0" in running and "runs/killed/s0" not in running


def test_runs_lists_a_folder_without_writing_an_index_into_it(outcome):
    plain, scanned = outcome["plain"], outcome["scanned"]
    r = by_argv(outcome, "runs", str(plain))
    assert r["rc"] == 0 and "plus-last-even" in r["stdout"], r
    assert sorted(str(p) for p in plain.rglob("*")) == outcome["plain_before"]
    assert not (plain / "index.sqlite").exists()
    r = by_argv(outcome, "runs", str(scanned), "--scan")
    assert r["rc"] == 0 and (scanned / "index.sqlite").exists(), r


def test_the_console_script_itself_gives_one_line(tmp_path):
    """The real entry point (no fork): a segfault-sized thread count and a NaN integer."""
    for argv in (["run", "plus-last-even", *SMOKE, "--set", "train.threads=100000", "--out", str(tmp_path / "a")],
                 ["run", "plus-last-even", *SMOKE, "--set", "train.steps=nan", "--out", str(tmp_path / "b")]):
        proc = subprocess.run([sys.executable, "-m", "tinyscope.cli", *argv], capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=300)
        assert proc.returncode == 2 and len(lines(proc.stderr)) == 1, proc.stderr
