"""Every CLI argument is checked before any work starts: one line naming the option (no JVM)."""

from __future__ import annotations

import pytest

from federation.cli import main


@pytest.mark.parametrize("argv,option,message", [
    (["run", "CQ5", "--rate", "0"], "--rate", "must be a finite number > 0"),
    (["run", "CQ5", "--rate", "-5"], "--rate", "must be a finite number > 0"),
    (["run", "CQ5", "--plugs", "0"], "--plugs", "must be >= 1"),
    (["run", "CQ5", "--seconds", "0"], "--seconds", "must be >= 1"),
    (["run", "CQ5", "--seconds-per-batch", "0"], "--seconds-per-batch", "must be >= 1"),
    (["run", "CQ5", "--allowed-lateness", "-1"], "--allowed-lateness", ">= 0"),
    (["run", "CQ5", "--event-horizon", "nan"], "--event-horizon", "finite number > 0"),
    (["explain", "CQ5", "--rate", "inf"], "--rate", "must be a finite number > 0"),
    (["explain", "CQ5", "--sweep", "1000:40000"], "--sweep", "want start:stop:step"),
    (["explain", "CQ5", "--sweep", "1000:40000:0"], "--sweep", "must be a finite number > 0"),
    (["generate", "--out", "x", "--plugs", "0"], "--plugs", "must be >= 1"),
])
def test_bad_arguments_are_refused_with_the_option_named(argv, option, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert option in err and message in err


def run_err(argv, capsys) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err.strip()


def test_missing_data_directory(tmp_path, capsys):
    err = run_err(["run", "CQ5", "--data", str(tmp_path / "nope")], capsys)
    assert err == f"fedq run: --data: {tmp_path / 'nope'} is not a directory"


def test_output_where_no_directory_can_be_made_is_refused_before_the_run(tmp_path, capsys):
    from federation.runtime.options import check_output

    assert check_output(tmp_path / "no" / "such" / "r.parquet") is None  # made at the end
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "such" / "r.parquet"
    err = run_err(["run", "CQ5", "--output", str(out)], capsys)
    assert err == (f"fedq run: --output: cannot write to {out.parent} ({tmp_path / 'file'} is "
                   "not a writable directory)")


def test_existing_output_needs_overwrite(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    out.write_bytes(b"x")
    err = run_err(["run", "CQ5", "--output", str(out)], capsys)
    assert "exists; pass --overwrite to replace it" in err
    d = tmp_path / "dir"
    d.mkdir()
    (d / "results.parquet").write_bytes(b"x")
    assert "exists" in run_err(["run", "CQ5", "--output", str(d)], capsys)


@pytest.mark.parametrize("placement,message", [
    ("", "placement is empty"),
    ("op1=db,op1=spe", "placement names 'op1' twice (op1=db and op1=spe)"),
    ("op1=db,,op2=db", "placement item ''"),
    ("op1=gpu", "unknown engine 'gpu'"),
])
def test_malformed_placements_are_refused(placement, message, capsys):
    err = run_err(["run", "CQ5", "--placement", placement], capsys)
    assert err.startswith("fedq run: --placement: ") and message in err


@pytest.mark.parametrize("kw,message", [
    ({"seconds_per_batch": 0}, "seconds_per_batch: must be a whole number >= 1, got 0"),
    ({"rate": float("inf")}, "rate: must be a finite number > 0, got inf"),
    ({"allowed_lateness_s": -1}, "allowed_lateness_s: must be a finite number >= 0, got -1"),
    ({"event_horizon_s": 0}, "event_horizon_s: must be a finite number > 0, got 0"),
    ({"plugs": True}, "plugs: must be a whole number >= 1, got True"),
    ({"warmup_batch_s": 5, "seconds_per_batch": 2},
     "warmup_batch_s: needs seconds_per_batch=1, got seconds_per_batch=2"),
    ({"max_file": 3}, "max_file: is not an option here"),  # a misspelt option is refused
])
def test_run_refuses_bad_arguments_before_any_work(kw, message, tmp_path):
    from federation.api import run
    from federation.errors import OptionError
    from federation.smartplug.queries import QUERIES

    with pytest.raises(OptionError) as e:
        run(QUERIES["CQ5"](), "db", work_dir=tmp_path, **kw)
    assert str(e.value) == message and e.value.option == message.split(":")[0]
    assert not any(tmp_path.iterdir())  # nothing generated, nothing started


@pytest.mark.parametrize("command", ["explain", "generate", "run", "import", "stats"])
def test_every_command_has_examples_and_every_option_says_what_it_does(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert "example" in text, text
    import argparse

    from federation.cli import data, explain, generate, run

    sub = argparse.ArgumentParser().add_subparsers()
    explain.add_parser(sub)
    generate.add_parser(sub)
    run.add_parsers(sub)
    data.add_parsers(sub)
    mute = [a.option_strings or a.dest for a in sub.choices[command]._actions if not a.help]
    assert not mute, f"fedq {command}: options without help: {mute}"


@pytest.mark.parametrize("extra,option,words", [
    (["--follow"], "--follow", "needs --data"),
    (["--until", "2013-09-01T00:10:00", "--data", "{data}"], "--until",
     "needs --follow or a live source"),
    (["--follow", "--adaptive", "--decide-every", "2.5", "--data", "{data}"],
     "--decide-every", "not a multiple of the slide"),
    (["--follow", "--data", "{data}", "--output", "{tmp}/o.duckdb", "--output-table", "1x"],
     "--output-table", "must be a table name"),
])
def test_live_options_are_refused_before_any_work(extra, option, words, tmp_path, capsys):
    from federation.smartplug.datagen import generate

    data = tmp_path / "data"
    generate(data, rate=10, seconds=2, plugs=2)
    argv = [x.format(data=data, tmp=tmp_path) for x in extra]
    err = run_err(["run", "CQ1", *argv], capsys)
    assert err.startswith(f"fedq run: {option}: ") and words in err, err
    assert not (tmp_path / "o.duckdb").exists()
