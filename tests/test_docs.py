"""The documents describe the software as it is.

- every test a document cites (`tests/x.py::test_name`, or `::test_name` after
  a file named earlier in the same document) exists, and so does every
  `app/...` path it names, so a renamed, moved or removed one shows up as a
  stale document;
- no document narrates the work that made it: no issue numbers, work stops or
  sessions, and no figure told against an earlier run (history belongs in git
  and CHANGELOG.md);
- every option of every `drax` command is described in a section of a
  document that names that command, not only in `--help`, and every option
  of every benchmark in the section of loadtest/README.md that names it.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([*REPO.glob("docs/*.md"), REPO / "README.md", *REPO.glob("loadtest/*.md")])
CITED = re.compile(r"`((?:tests/[\w/]+\.py)?)::(test_\w+)")
# Issue numbers, work stops and sessions, and figures told against an earlier
# run or pass ("the run before", "in the pass at <commit>", "(was 37.8)",
# "down from 6.84"): a document gives what the software measures now.
NARRATION = re.compile(r"\bissue #?\d+|#\d+'s\b|\bstop \d+\b"
                       r"|\b(?:this|last|next|previous) (?:stop|session)\b"
                       r"|\bthe (?:run|pass) before\b|\bin the (?:run|pass) at\b"
                       r"|\bthat profile is from\b|\b(?:down|up) from \d|\(was \d",
                       re.IGNORECASE)


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_cited_test_exists(doc: Path) -> None:
    current: str | None = None
    missing = []
    for path, name in CITED.findall(doc.read_text()):
        current = path or current
        assert current is not None, f"{doc}: ::{name} cited before any test file"
        source = REPO / current
        if not source.exists() or not re.search(rf"def {name}\(", source.read_text()):
            missing.append(f"{current}::{name}")
    assert not missing, f"{doc.relative_to(REPO)} cites tests that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_document_narrates_the_work(doc: Path) -> None:
    found = [m.group(0) for m in NARRATION.finditer(doc.read_text())]
    assert not found, f"{doc.relative_to(REPO)} names issues or work stops: {found}"


APP_PATH = re.compile(r"`(app/[\w/]+(?:\.py)?)`")


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_module_path_a_document_names_exists(doc: Path) -> None:
    missing = sorted({path for path in APP_PATH.findall(doc.read_text())
                      if not (REPO / path).exists() and not (REPO / f"{path}.py").exists()})
    assert not missing, f"{doc.relative_to(REPO)} names paths that do not exist: {missing}"


# A Markdown note by name (`libeval.md §3`), or a path on the machine it was written on.
NOTE = re.compile(r"(?<![\w./-])[\w-]+\.md\b|/work/\w+")
# What a reader of the repository can open: its own documents and the sources.
CITING = [*DOCUMENTS, *sorted(REPO.glob("app/**/*.py")), *sorted(REPO.glob("loadtest/*.py")),
          *sorted(REPO.glob("tools/*.py"))]


def _markdown_here() -> frozenset[str]:
    """The names of the repository's Markdown files (hidden folders, such as a
    virtual environment, left out)."""
    names = set()
    for _folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]
        names.update(f for f in files if f.endswith(".md"))
    return frozenset(names)


MARKDOWN_HERE = _markdown_here()


def _notes_outside(text: str) -> list[str]:
    return sorted({m.group(0) for m in NOTE.finditer(text)
                   if m.group(0).startswith("/") or m.group(0) not in MARKDOWN_HERE})


@pytest.mark.parametrize("source", CITING, ids=lambda p: str(p.relative_to(REPO)))
def test_every_note_cited_is_in_the_repository(source: Path) -> None:
    """A reader has only the repository: a design note or a path outside it is
    a dead reference."""
    outside = _notes_outside(source.read_text())
    assert not outside, f"{source.relative_to(REPO)} cites notes outside the repository: {outside}"


def test_the_checks_find_what_they_look_for() -> None:
    text = ("see `tests/kube/test_kube_lease.py::test_a` and `::test_b` in "
            "`app/sources/kube/lease.py`; fixed for issue #22 in stop 4")
    assert CITED.findall(text) == [("tests/kube/test_kube_lease.py", "test_a"), ("", "test_b")]
    assert APP_PATH.findall(text) == ["app/sources/kube/lease.py"]
    assert [m.group(0) for m in NARRATION.finditer(text)] == ["issue #22", "stop 4"]
    history = ("p99 12.3 ms (was 29.4 in the run before), 4.29 us, down from 6.84; "
               "attempt 36.3 in the pass at becad50, this session")
    assert [m.group(0) for m in NARRATION.finditer(history)] == [
        "(was 2", "the run before", "down from 6", "in the pass at", "this session"]
    present = "a 1-GPU pod no longer fits there; filter took 2.5 ms before its bind"
    assert not NARRATION.search(present)
    assert _notes_outside("see libeval.md §3, docs/performance.md and /work/shared/docs") == [
        "/work/shared", "libeval.md"]
    # The documents cite tests and name paths: the checks above are not vacuous.
    assert all(sum(len(pattern.findall(doc.read_text())) for doc in DOCUMENTS) > 20
               for pattern in (CITED, APP_PATH))


EXPORTED = re.compile(r"\"(drax_[a-z_]+)\"")
DOCUMENTED = re.compile(r"`(drax_[a-z_]+)`")


def test_docs_metrics_lists_every_metric_drax_exports_and_no_other() -> None:
    exported = {name.removesuffix("_total") for path in (REPO / "app").rglob("*.py")
                for name in EXPORTED.findall(path.read_text())}
    documented = {name.removesuffix("_total")
                  for name in DOCUMENTED.findall((REPO / "docs" / "metrics.md").read_text())}
    assert sorted(exported - documented) == [], "exported, missing from docs/metrics.md"
    assert sorted(documented - exported) == [], "in docs/metrics.md, not exported"


def _commands() -> dict[str, Any]:
    from app.cli import build_parser
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


HEADING = re.compile(r"#{1,6} ")


def _sections(text: str) -> list[str]:
    """A document cut at its headings (a `#` line inside a code block is none)."""
    out: list[str] = []
    current: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and HEADING.match(line) and current:
            out.append("\n".join(current))
            current = []
        current.append(line)
    out.append("\n".join(current))
    return out


def test_sections_are_cut_at_headings_outside_code() -> None:
    text = "# a\n`drax x --y`\n```sh\n# a comment\n```\n## b\nmore"
    assert _sections(text) == ["# a\n`drax x --y`\n```sh\n# a comment\n```", "## b\nmore"]


def test_every_command_line_option_is_documented() -> None:
    """In a section of a document that names `drax <command>`: an option of
    one command mentioned for another does not count."""
    sections = [s for doc in DOCUMENTS for s in _sections(doc.read_text())]
    missing = []
    for name, command in _commands().items():
        own = [s for s in sections if re.search(rf"drax {name}\b", s)]
        missing += [f"drax {name} {action.option_strings[-1]}" for action in command._actions
                    if action.option_strings and action.dest != "help"
                    and not any(re.search(rf"{re.escape(o)}\b", s)
                                for s in own for o in action.option_strings)]
    assert len(_commands()) >= 6
    assert not missing, f"options not described where their command is: {missing}"


def test_the_readme_sizing_carries_the_node_pool_record() -> None:
    """README's sizing table and its per-10,000-node figures are the ones
    `loadtest/RESULTS.md` renders from `loadtest/results/node-pool.json`."""
    import json

    from loadtest import bench_pool

    mb = 1024 * 1024
    record = json.loads((REPO / "loadtest" / "results" / "node-pool.json").read_text())
    readme = (REPO / "README.md").read_text()
    section = " ".join(readme[readme.index("**Sizing**"):
                              readme.index("## Your own inventory")].split())
    api, files = (bench_pool.sizing(record, source) for source in ("api", "files"))
    assert api is not None and files is not None
    expected = [
        f"{api['rss_per_node_bytes'] * 10_000 / mb:,.0f} MB (lists) to "
        f"{files['rss_per_node_bytes'] * 10_000 / mb:,.0f} MB (files) of RSS",
        f"{api['rss_base_bytes'] / mb:,.0f} MB (lists) to "
        f"{files['rss_base_bytes'] / mb:,.0f} MB (files) for the process itself",
        f"{api['ready_s_per_10k_nodes']:.1f} s (lists) to "
        f"{files['ready_s_per_10k_nodes']:.1f} s (files) to ready",
        f"{record['list_decode']['bytes'] / mb:,.0f} MB of JSON",
        f"about {record['list_decode']['seconds']['skim']:.1f} s",
        *(f"{'paged lists' if r['source'] == 'api' else 'JSON files'} | "
          f"{r['rss_bytes'] / mb:,.0f} MB | {r['ready_s']:.1f} s |" for r in record["runs"]),
    ]
    missing = [figure for figure in expected if figure not in section]
    assert not missing, f"README's sizing differs from node-pool.json: {missing}"


BENCHMARKS = sorted([*REPO.glob("loadtest/*.py"), *REPO.glob("loadtest/scheduler_perf/*.py")])
OPTION = re.compile(r'add_argument\((?:\s*"-\w",)?\s*"(--[a-z0-9-]+)"')


def test_every_benchmark_option_is_documented() -> None:
    """In a section of loadtest/README.md that names the benchmark (`python -m
    loadtest.x` or `loadtest/x.py`), as the `drax` commands' options are."""
    sections = _sections((REPO / "loadtest" / "README.md").read_text())
    missing = []
    for path in BENCHMARKS:
        file = str(path.relative_to(REPO))
        module = file.removesuffix(".py").replace("/", ".").removesuffix(".__main__")
        names = re.compile(rf"python -m {re.escape(module)}(?![\w.])|{re.escape(file)}")
        own = [s for s in sections if names.search(s)]
        missing += [f"{module} {option}" for option in sorted(set(OPTION.findall(path.read_text())))
                    if not any(re.search(rf"{re.escape(option)}(?![\w-])", s) for s in own)]
    assert len(BENCHMARKS) > 15 and OPTION.findall('p.add_argument("-o", "--out")') == ["--out"]
    assert not missing, f"benchmark options not described where the benchmark is: {missing}"


def _cpu_p99(record: dict[str, Any]) -> dict[tuple[str, ...], str]:
    """A recorded benchmark's first table: each row's CPU p99, by its label columns."""
    table = record["tables"][0]
    labels, p99 = table["columns"].index("CPU p50"), table["columns"].index("CPU p99")
    return {tuple(row[:labels]): row[p99] for row in table["rows"]}


def test_the_preemption_doc_gives_the_victim_search_records() -> None:
    """docs/preemption.md's victim-search table and room paragraph carry the CPU
    p99s RESULTS.md renders from victim-search.json and victim-search-room.json."""
    import json

    results = REPO / "loadtest" / "results"
    text = (REPO / "docs" / "preemption.md").read_text()
    search = _cpu_p99(json.loads((results / "victim-search.json").read_text()))
    clusters = {("whole-GPU nodes", "0..999"): "uniform, random",
                ("varied", "0..999"): "varied, random",
                ("whole-GPU nodes", "3 levels"): "uniform, 3 levels",
                ("varied", "3 levels"): "varied, 3 levels"}
    rows = [line.split(" | ") for line in text.splitlines()
            if line.startswith("| whole-GPU nodes |") or line.startswith("| varied")]
    shown = {clusters[(cells[0].removeprefix("| ").split(":")[0], cells[1])]:
             [cell.removesuffix(" |") for cell in cells[2:]] for cells in rows}
    # The search after churn: its row, when the record has one, is the last column.
    changed = [call for (_, call) in search if call.startswith("every node, first, ")][:1]
    assert shown == {cluster: [f"{search[(cluster, call)]} ms" for call in (
        "best node, first", "every node, first", "best node, again", *changed)]
        for cluster in clusters.values()}, "docs/preemption.md differs from victim-search.json"
    room = _cpu_p99(json.loads((results / "victim-search-room.json").read_text()))
    paragraph = " ".join(text[text.index("weighs every lower-priority pod on each node for room"):]
                         .split("\n\n")[0].split())
    for call, words in (("best node, first", "of CPU at p99 for the best node"),
                        ("every node, first", "for every node"),
                        ("filter, first", "for the filter")):
        assert f"{room[(call,)]} ms {words}" in paragraph, (call, paragraph)
