"""The documentation site builds with ``mkdocs build --strict`` (no broken
link, anchor or reference), and what docs/hooks.py generates matches the
code: a page per op namespace holding every op of the registry, every error
code with its fix, examples whose highlighted line is the one the tests
mark, and a page per tutorial that includes the tutorial's file."""
import html
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from tilecomm.cli import main
from tilecomm.cli.ops import catalogue
from tilecomm.errors import CODES, FIXES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TUTORIALS = os.path.join(ROOT, "examples", "tutorials")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
    reason="the docs extra is not installed (pip install -e '.[docs]')")


def _text(path) -> str:
    """The visible text of a built page."""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def offline_site(tmp_path_factory):
    out = tmp_path_factory.mktemp("offline")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1", OFFLINE="true"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_offline_site_searches_from_disk_and_finds_ops_by_their_name(offline_site, site):
    # from file:// the browser can load a script but not fetch JSON: the index is a script
    script = (offline_site / "search" / "search_index.js").read_text(encoding="utf-8")
    assert not (site / "search" / "search_index.js").exists()        # the ordinary build
    assert (offline_site / "reference" / "ops" / "pld.system.html").exists()
    index = json.loads(script[script.index("{"):script.rindex("}") + 1])
    tokens = [t for t in re.split(index["config"]["separator"], "pld.system.defer_wait") if t]
    assert "defer_wait" in tokens
    # a title's words, as the page shows it (its markup is not searched)
    titles = {d["location"] for d in index["docs"] if "defer_wait" in
              re.split(index["config"]["separator"], re.sub(r"<[^>]+>", "", d["title"]))}
    assert "reference/ops/pld.system.html#pld-system-defer_wait" in titles


@pytest.fixture(scope="module")
def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks",
                                                  os.path.join(ROOT, "docs", "hooks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_op_is_on_its_namespace_page(site):
    records = {id(r): r for r in catalogue().values()}.values()
    namespaces = {r.name.rsplit(".", 1)[0] for r in records}
    built = {d for d in os.listdir(site / "reference" / "ops") if d != "index.html"}
    assert built == namespaces
    for rec in records:
        text = _text(site / "reference" / "ops" / rec.name.rsplit(".", 1)[0] / "index.html")
        assert f"{rec.name}{rec.signature}" in text, rec.name
        assert rec.doc.strip().splitlines()[0].replace("``", "") in text, rec.name
    index = _text(site / "reference" / "ops" / "index.html")
    assert all(name in index for name in catalogue())      # aliases too


def test_every_error_code_has_its_meaning_and_fix(site):
    text = _text(site / "reference" / "errors" / "index.html")
    for code, meaning in CODES.items():
        assert f"{code}¶" in text and meaning.replace("`", "") in text, code
        assert FIXES[code].replace("`", "") in text, code


def test_examples_highlight_the_marked_line(hooks):
    examples = hooks._marked_examples()
    assert len(examples) > 40
    for code, (rel, source, mark, kind) in examples.items():
        line = source.splitlines()[mark - 1]
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            marked = [ln for ln in f.read().splitlines() if re.search(rf"# {kind}:{code}\b", ln)]
        assert any(ln.startswith(line) for ln in marked), (code, line)
        assert code in CODES


def test_every_tutorial_has_a_page_that_includes_its_file(site):
    files = sorted(f for f in os.listdir(TUTORIALS) if f.endswith(".py"))
    assert len(files) >= 5
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        nav = f.read()
    for name in files:
        page = f"tutorials/{name[:-3]}.md"
        assert page in nav, f"{page} is not in the nav of mkdocs.yml"
        with open(os.path.join(TUTORIALS, name), encoding="utf-8") as f:
            code = f.read()
        text = _text(site / "tutorials" / name[:-3] / "index.html")
        # the whole file, as included: its every non-blank line, in order
        lines = [ln.strip() for ln in code.splitlines() if ln.strip()]
        at = 0
        for ln in lines:
            at = text.find(ln, at)
            assert at >= 0, f"{name}: {ln!r} is not on its page"


def test_the_architecture_notes_are_on_the_site(site):
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        title = f.readline().lstrip("# ").strip()
    assert title in _text(site / "architecture" / "index.html")


def test_the_api_reference_documents_the_callers_classes(site):
    text = _text(site / "reference" / "api" / "index.html")
    for name in ("RunConfig", "DistributedConfig", "DistributedWorker", "DeadlockError",
                 "DataRaceError", "explore", "replay", "ExploreResult", "Failure"):
        assert re.search(rf"\b{name}\b", text), name


def test_the_command_page_shows_every_verb(site):
    text = _text(os.path.join(site, "guide", "command", "index.html"))
    assert [v for v in main.commands if f"tilecomm {v} " not in text] == []
