"""train/jsonl.py: the one reader of JSON-lines logs, under both contracts (a training log,
whose records carry a step, and any JSON-lines file of a run)."""
import pytest

from tinyscope.errors import CheckpointError
from tinyscope.report.records import RunReadError, read_jsonl
from tinyscope.train.jsonl import read_records
from tinyscope.train.trainer import read_log


def _write(tmp_path, text: str | bytes):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


@pytest.mark.parametrize("require_step", [False, True])
def test_a_torn_last_line_is_dropped_and_blank_lines_skipped(tmp_path, require_step, caplog):
    path = _write(tmp_path, '{"step": 1}\n\n{"step": 2}\n{"step": 3, "lo')
    assert read_records(path, RunReadError, require_step) == [{"step": 1}, {"step": 2}]
    assert "torn last line" in caplog.text
    assert read_records(_write(tmp_path, '{"step": 1}\n{"ste\n\n  \n'), RunReadError, require_step) == [{"step": 1}]


@pytest.mark.parametrize("bad", ['{"step": 2', "\xff\xfe", "[1, 2]"])
def test_damage_before_the_last_line_names_the_file_and_line(tmp_path, bad):
    path = _write(tmp_path, '{"step": 1}\n' + bad + '\n{"step": 3}\n')
    with pytest.raises(CheckpointError, match=r"metrics.jsonl line 2 is not a log record .*; remove the line"):
        read_log(path)
    if bad != "[1, 2]":  # a JSON value that is not an object is skipped by the plain reader
        with pytest.raises(RunReadError, match=r"metrics.jsonl line 2 is not valid JSON"):
            read_jsonl(path)
    else:
        assert read_jsonl(path) == [{"step": 1}, {"step": 3}]


def test_a_training_log_needs_an_integer_step_and_a_missing_file_is_empty(tmp_path):
    with pytest.raises(CheckpointError, match="not a record with a step"):
        read_log(_write(tmp_path, '{"step": "1"}\n{"step": 2}\n'))
    assert read_log(tmp_path / "absent.jsonl") == [] == read_jsonl(tmp_path / "absent.jsonl")
