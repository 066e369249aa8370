"""`.ci/install` hands uv the sources pip is configured to use (the Makefile's venv rule runs it)."""
from __future__ import annotations

import doctest
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

INSTALL = Path(__file__).resolve().parents[1] / ".ci" / "install"


def load_install():
    loader = importlib.machinery.SourceFileLoader("ci_install", str(INSTALL))
    spec = importlib.util.spec_from_loader("ci_install", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_doctests():
    assert doctest.testmod(load_install()).failed == 0


def test_pip_variables_win_over_its_files_and_reach_uv(monkeypatch, tmp_path):
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nfind-links = /from/file\nextra-index-url = file:///one\n    file:///two\n"
                      "constraint = /c.txt\n[install]\nno-index = false\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", "/from/env /second")
    monkeypatch.setenv("PIP_CERT", "/my/cert.pem")
    install = load_install()
    settings = install.pip_settings(sys.executable)
    assert settings["find-links"] == "/from/env /second"
    options, env = install.uv_arguments(settings)
    assert options == ["--index-strategy", "unsafe-best-match", "--extra-index-url", "file:///one",
                       "--extra-index-url", "file:///two", "--find-links", "/from/env", "--find-links", "/second",
                       "--constraint", "/c.txt"]
    assert env == {"SSL_CERT_FILE": "/my/cert.pem"}


def test_bytecode_is_written_for_what_the_shares_import_even_where_python_writes_none(monkeypatch, tmp_path):
    (tmp_path / "first.py").write_text("import second\n")
    (tmp_path / "second.py").write_text("VALUE = 2\n")
    (tmp_path / "unused.py").write_text("VALUE = 3\n")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert load_install().write_bytecode(sys.executable, [["first"], ["not_installed"]])
    written = sorted(path.name.split(".")[0] for path in (tmp_path / "__pycache__").glob("*.pyc"))
    assert written == ["first", "second"]
