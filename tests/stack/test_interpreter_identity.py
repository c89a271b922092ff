"""A recorded server's interpreter is compared by what it is, not by the name it ran under."""

from __future__ import annotations

from pathlib import Path

from voicelat.stack.processes import interpreter_identity, same_server_command


def _venv(root: Path, base: Path) -> Path:
    """A venv's layout as `python -m venv` makes it: three names for one interpreter."""
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(f"home = {base.parent}\n")
    (root / "bin" / "python3").symlink_to(base)
    (root / "bin" / "python").symlink_to("python3")
    (root / "bin" / "python3.11").symlink_to("python3")
    return root / "bin"


def test_the_names_of_one_venv_are_one_interpreter(tmp_path: Path) -> None:
    base = tmp_path / "base" / "python3.11"
    base.parent.mkdir()
    base.write_text("")
    bin_dir = _venv(tmp_path / "venv", base)
    names = {interpreter_identity(str(bin_dir / n)) for n in ("python", "python3", "python3.11")}
    assert len(names) == 1
    args = ["-m", "llama_cpp.server", "--port", "8090"]
    assert same_server_command([str(bin_dir / "python3"), *args], [str(bin_dir / "python"), *args])


def test_two_venvs_on_one_base_python_differ(tmp_path: Path) -> None:
    base = tmp_path / "base" / "python3.11"
    base.parent.mkdir()
    base.write_text("")
    one, two = _venv(tmp_path / "one", base), _venv(tmp_path / "two", base)
    assert interpreter_identity(str(one / "python")) != interpreter_identity(str(two / "python"))
    args = ["-m", "wyoming_piper"]
    assert not same_server_command([str(one / "python"), *args], [str(two / "python"), *args])


def test_a_symlink_to_a_plain_python_is_that_python(tmp_path: Path) -> None:
    real = tmp_path / "usr" / "python3.11"
    real.parent.mkdir()
    real.write_text("")
    alias = tmp_path / "python3"
    alias.symlink_to(real)
    assert interpreter_identity(str(alias)) == interpreter_identity(str(real))


def test_other_arguments_are_other_settings(tmp_path: Path) -> None:
    py = str(tmp_path / "python")
    assert not same_server_command([py, "--n_ctx", "2048"], [py, "--n_ctx", "1024"])
    assert not same_server_command([py, "--n_ctx"], [py, "--n_ctx", "1024"])
