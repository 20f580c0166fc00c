"""tools/extras_size.py counts what the extras add: packages the base lacks, or holds at another version."""

from __future__ import annotations

from toolloader import load_tool


def report(*packages: tuple[str, str]) -> dict[str, object]:
    return {"install": [{"metadata": {"name": name, "version": version}} for name, version in packages]}


def test_the_extras_add_the_packages_the_base_does_not_install_at_that_version() -> None:
    tool = load_tool("extras_size")
    base = tool.installed(report(("torch", "2.14.1"), ("typing_extensions", "4.16.0"), ("PyYAML", "6.0.4")))
    extended = tool.installed(report(("torch", "2.14.1"), ("Typing.Extensions", "4.16.0"), ("pyyaml", "6.0.3"),
                                     ("wandb", "0.31.0"), ("absl_py", "2.5.1")))
    assert base == {"torch": "2.14.1", "typing-extensions": "4.16.0", "pyyaml": "6.0.4"}
    assert tool.added(base, extended) == {"absl-py": "2.5.1", "pyyaml": "6.0.3", "wandb": "0.31.0"}
    assert list(tool.added(base, extended)) == ["absl-py", "pyyaml", "wandb"]
