"""A docstring extension of the API reference (loaded by mkdocstrings).

tilecomm's docstrings are plain text written for ``help()``: a list of
fields is a name, two or more spaces, and its meaning, continued on lines
indented to the meaning's column (``RunConfig``).  Markdown would run such a
list together into one paragraph; this turns each into a table, and leaves
everything else as written."""
from __future__ import annotations

import re

import griffe

FIELD = re.compile(r"^(\w[\w.*]*)\s{2,}(\S.*)$")          # a list's first line
NEXT_FIELD = re.compile(r"^(\w[\w.*]*)\s+(\S.*)$")        # a long name: one space


def fields_as_tables(text: str) -> str:
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        entries, j, column = [], i, 0
        while j < len(lines):
            m = (NEXT_FIELD if entries else FIELD).match(lines[j])
            if not m or entries and m.start(2) != column:
                break
            column, name, meaning = m.start(2), m.group(1), [m.group(2)]
            j += 1
            while j < len(lines) and lines[j].startswith(" " * column) and lines[j].strip():
                meaning.append(lines[j].strip())
                j += 1
            entries.append((name, " ".join(meaning)))
        if len(entries) >= 2:
            out += ["", "| field | meaning |", "|---|---|"]
            out += [f"| `{n}` | {m.replace('|', '&#124;')} |" for n, m in entries]
            out.append("")
            i = j
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)


class FieldTables(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = fields_as_tables(obj.docstring.value)
