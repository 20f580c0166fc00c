"""Every `clbench ...` command written in the README and the documentation site, and what the CLI says of it.

A command is found in a fenced code block (a line, or a part between `&&`, `;` or `|`, after an optional
`time`, `env`, variable assignments and `.venv/bin/`, with `\\` continuations joined) or in an inline code span
that starts with `clbench `. Each is checked against the Typer app without running anything: the command exists;
every option exists for it; the benchmark it names is shipped (or is a spec path, a placeholder in capitals, or a
template); every method named by `-m` is registered; every `--set KEY=VALUE` resolves against that benchmark's spec.
Synopsis lines (with `[`, `|` or `...`) are checked for their command and options only.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`((?:\.venv/bin/)?clbench [^`\n]+)`(?!`)")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_0-9.,-]*$")
# Plugins the documents install before naming them: the example package's entry point (`examples/l2transfer`)
EXAMPLE_PLUGINS = {"l2transfer": REPO / "examples" / "l2transfer"}
YAML_NAME = re.compile(r"^```yaml\n(?:.*\n)*?name: ([\w.-]+)", re.M)


def spec_names_written_in_documents() -> set[str]:
    """The `name:` of every spec the documents write out in a yaml block (a user's own benchmark)."""
    return {name for document in DOCUMENTS for name in YAML_NAME.findall(document.read_text())}


@dataclass(frozen=True)
class Documented:
    """One command as written, and where."""

    text: str
    where: str

    @property
    def template(self) -> bool:
        return any(mark in self.text for mark in ("[", "...", "|", "<", "{"))


def commands_in(path: Path) -> list[Documented]:
    text = path.read_text()
    name = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name
    found: list[Documented] = []
    for block in FENCE.finditer(text):
        body = block.group(1).replace("\\\n", " ")
        line_at = text[:block.start()].count("\n") + 2
        for offset, line in enumerate(body.splitlines()):
            for part in re.split(r"&&|;|\s\|\s", line):
                part = part.strip()
                match = re.match(r"^(?:time\s+)?(?:env\s+)?(?:\S+=\S+\s+)*(?:\.venv/bin/)?(clbench\s.*)$", part)
                if match and not part.startswith("#"):
                    found.append(Documented(" ".join(match.group(1).split(" # ")[0].split()),
                                            f"{name}:{line_at + offset}"))
    for match in INLINE.finditer(FENCE.sub("", text)):
        command = match.group(1).removeprefix(".venv/bin/")
        found.append(Documented(command, f"{name} (inline)"))
    return found


def documented_commands() -> list[Documented]:
    return [command for document in DOCUMENTS for command in commands_in(document)]


def problems(command: Documented) -> list[str]:
    """What is wrong with a documented command, by the CLI's own definitions (empty when nothing)."""
    import typer
    from typer._click import Context

    from clbench.cli import app

    group = typer.main.get_command(app)
    context = Context(group, info_name="clbench")
    try:
        words = shlex.split(command.text)[1:]
    except ValueError as error:
        return [f"cannot be split into words: {error}"]
    if not words or words[0].startswith("-"):
        known = {opt for param in group.params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}
        return [f"unknown option {word}" for word in words if word.startswith("-") and word not in known]
    if words[0] == "..." and command.template:
        return []
    cli_command = group.get_command(context, words[0])
    if cli_command is None:
        return [f"unknown command {words[0]!r}"]
    options = {opt: param for param in cli_command.params for opt in (*param.opts, *param.secondary_opts)}
    options["--help"] = None
    found: list[str] = []
    values: dict[str, list[str]] = {}
    positional: list[str] = []
    index = 1
    while index < len(words):
        word = words[index]
        if word.startswith("-") and len(word) > 1 and not re.match(r"^-\d", word):
            name, _, inline_value = word.partition("=")
            if name not in options:
                found.append(f"unknown option {name} for `clbench {words[0]}`")
                index += 1
                continue
            param = options[name]
            takes_value = param is not None and not getattr(param, "is_flag", False) and not getattr(
                param, "count", False)
            if takes_value and not inline_value:
                index += 1
                inline_value = words[index] if index < len(words) else ""
            if param is not None:
                for opt in param.opts:
                    values.setdefault(opt, []).append(inline_value)
        else:
            positional.append(word)
        index += 1
    if command.template:
        return found
    return found + _value_problems(words[0], positional, values)


def _value_problems(name: str, positional: list[str], values: dict[str, list[str]]) -> list[str]:
    from clbench.approaches.avalanche import STRATEGIES as AVALANCHE_STRATEGIES
    from clbench.approaches.registry import REGISTRY
    from clbench.errors import ClbenchError
    from clbench.spec import benchmark_names, load_benchmark
    from clbench.spec.catalogue import DATASET_NAMES

    shipped = set(benchmark_names())
    own = spec_names_written_in_documents()
    found: list[str] = []
    if name == "fetch":
        for word in positional:
            if not (word in shipped or word in DATASET_NAMES or word.endswith(".yaml") or PLACEHOLDER.match(word)):
                found.append(f"fetch names {word!r}: neither a shipped benchmark nor a data set")
        return found
    benchmark = positional[0] if positional else None
    if benchmark is not None and not (benchmark in shipped or benchmark in own or benchmark.endswith(".yaml")
                                      or PLACEHOLDER.match(benchmark)):
        found.append(f"unknown benchmark {benchmark!r}")
    for methods in values.get("--method", []):
        for method in methods.split(","):
            example = EXAMPLE_PLUGINS.get(method)
            if example is not None:
                assert example.is_dir(), f"the example plugin {method} is documented but {example} is gone"
                continue
            known = method in REGISTRY or method in AVALANCHE_STRATEGIES  # av-*: known with or without the extra
            if method and not known and ":" not in method and not PLACEHOLDER.match(method):
                found.append(f"unknown method {method!r}")
    # a value in capitals (`data.n_tasks=N`) is a placeholder: that option is not resolved
    sets = [value for value in values.get("--set", []) if value and not PLACEHOLDER.match(value.partition("=")[2])]
    checkable = benchmark is None or benchmark in shipped
    if sets and checkable and not any(PLACEHOLDER.match(value.split("=")[0]) for value in sets):
        try:
            load_benchmark(benchmark or "mixture8", sets)
        except ClbenchError as error:
            found.append(f"--set does not resolve: {error}")
    return found
