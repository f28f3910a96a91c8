"""Templates.from_package: every way a package or its template directory cannot be read
is a TemplateError that names the package and the directory, and says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from veridic import Templates
from veridic.templates import TemplateError


def _package(root: Path, name: str, init: str = "", folder: str | None = "templates") -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(init)
    if folder is not None:
        (root / name / folder).mkdir()


def test_a_package_whose_import_raises_is_refused_with_its_error_as_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path, "raising_pkg_a", 'raise RuntimeError("no config")')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        TemplateError,
        match=r"from_package\('raising_pkg_a', 'templates'\): importing package 'raising_pkg_a' "
        r"raised RuntimeError: 'no config'; .*fix",
    ) as caught:
        Templates.from_package("raising_pkg_a")
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_a_package_that_imports_a_missing_module_is_not_said_to_be_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path, "needy_pkg_b", "import not_installed_dependency_b")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TemplateError) as caught:
        Templates.from_package("needy_pkg_b")
    message = str(caught.value)
    assert "importing package 'needy_pkg_b' raised ModuleNotFoundError" in message
    assert "not_installed_dependency_b" in message
    assert "name an importable package" not in message


def test_a_missing_package_is_named_as_not_installed() -> None:
    with pytest.raises(
        TemplateError, match=r"package 'no_such_pkg_c' cannot be found \(it is not installed"
    ):
        Templates.from_package("no_such_pkg_c")


def test_a_missing_template_directory_names_the_package_and_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path, "bare_pkg_d", folder=None)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TemplateError) as caught:
        Templates.from_package("bare_pkg_d", "prompts")
    message = str(caught.value)
    assert "package 'bare_pkg_d' has no directory 'prompts'" in message
    assert str(tmp_path / "bare_pkg_d") in message
    assert ".;" not in message


@pytest.mark.parametrize("path", ["/tmp", "../elsewhere", "templates/../../x"])
def test_a_directory_outside_the_package_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    _package(tmp_path, "outside_pkg_e")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TemplateError, match=r"leaves the package.*a relative path inside"):
        Templates.from_package("outside_pkg_e", path)


@pytest.mark.parametrize(
    ("package", "path", "shown"),
    [
        (None, "templates", r"None as its package"),
        (Path("pkg"), "templates", r"a PosixPath \(\"PosixPath\('pkg'\)\"\) as its package"),
        ("json", None, r"None as its path"),
    ],
)
def test_a_package_or_directory_that_is_not_text_is_refused(
    package: object, path: object, shown: str
) -> None:
    with pytest.raises(TemplateError, match=shown + r".*as text"):
        Templates.from_package(package, path)  # type: ignore[arg-type]  # what a careless caller passes


def test_an_import_error_whose_class_and_message_lie_is_named_safely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The class's name put a line of its own (a CI runner's command) in the message, and a
    # __str__ that raises escaped from_package() instead of its TemplateError.
    init = (
        "class Boom(Exception):\n"
        "    def __str__(self):\n"
        "        raise KeyError('no message')\n"
        "Boom.__name__ = 'Boom\\n::error::x' + 'y' * 1000\n"
        "raise Boom()\n"
    )
    _package(tmp_path, "lying_pkg_f", init)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TemplateError) as caught:
        Templates.from_package("lying_pkg_f")
    message = str(caught.value)
    assert "\n" not in message  # the class's newline escaped: no line of its own
    assert "its message could not be read" in message
    assert len(message) < 1_000
    assert type(caught.value.__cause__).__name__.startswith("Boom")
