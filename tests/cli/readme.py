"""What the README shows a command print, for the tests that run the command."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def shown_output(command: str) -> str:
    """The code block right after the one that holds `command` on a line of its own."""
    readme = README.read_text()
    head = readme.index(command + "\n")
    body = readme[readme.index("```", readme.index("```\n", head) + 4):]
    return body[body.index("\n") + 1: body.index("```", 3)]
