import subprocess

import pytest

from aiot.host.transports.quoting import build_command

NASTY = ["a b", "it's", 'say "hi"', "x; rm -rf /", "$(touch pwned)", "`id`", "back\\slash", "", "*"]


@pytest.mark.parametrize("arg", NASTY)
def test_argument_reaches_the_program_verbatim(arg, tmp_path):
    cmd = build_command(["printf", "%s", arg], cwd=str(tmp_path))
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, check=True)
    assert out.stdout == arg
    assert not (tmp_path / "pwned").exists()


def test_cwd_and_env_are_quoted(tmp_path):
    odd = tmp_path / "dir with 'quote' and $(x)"
    odd.mkdir()
    cmd = build_command(["sh", "-c", 'printf "%s|%s" "$PWD" "$AIOT_X"'], cwd=str(odd), env={"AIOT_X": "v; $(y)"})
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, check=True)
    assert out.stdout == f"{odd}|v; $(y)"


@pytest.mark.parametrize("name", ["", "1X", "A-B", "A;B", "A B"])
def test_bad_env_names_are_refused(name):
    with pytest.raises(ValueError):
        build_command(["true"], env={name: "v"})


def test_empty_command_is_refused():
    with pytest.raises(ValueError):
        build_command([])


def test_replace_shell_makes_the_program_the_shells_pid(tmp_path):
    cmd = build_command(["sh", "-c", "echo $$"], cwd=str(tmp_path), env={"A": "1"}, replace_shell=True)
    out = subprocess.run(["/bin/sh", "-c", f"echo $$; {cmd}"], capture_output=True, text=True).stdout.split()
    assert out[0] == out[1]
