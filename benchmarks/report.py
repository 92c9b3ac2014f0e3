"""Printing a benchmark's markdown table and saving it where `--out` asks."""

from __future__ import annotations


def publish(lines: list[str], out: str | None) -> None:
    """Prints the table and, when `out` is a path, writes it there too."""
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
