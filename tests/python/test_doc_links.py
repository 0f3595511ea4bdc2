#!/usr/bin/env python3
"""Every relative link in the project's Markdown (README.md, docs/, data/, tests/)
points at a file that exists, and every #anchor at a heading of its target.

The docs quote figures, raw benchmark JSON and other pages by link; a renamed
file or heading would otherwise leave a reader with a dead link. Usage:
test_doc_links.py [REPO_ROOT] (default: two folders above this file).
Exit 0: every link resolves; 1: the dead links are listed.
"""
import os
import re
import sys
import unittest

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
SKIP_DIRS = {".git", "build", "node_modules"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"#{1,6}\s+(.*)")


def markdown_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for name in files:
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """The anchors of a Markdown file's headings (outside code fences), with
    GitHub's -1, -2 suffixes for repeated headings."""
    seen = {}
    out = set()
    fenced = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            if fenced:
                continue
            m = HEADING.match(line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else f"{s}-{n}")
    return out


def dead_links(root):
    """(file, link, why) for every relative link that does not resolve."""
    dead = []
    cache = {}
    for md in sorted(markdown_files(root)):
        with open(md, encoding="utf-8") as f:
            text = f.read()
        # Links inside code spans or fences are examples, not links.
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, mailto: ...
                continue
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            rel = os.path.relpath(md, root)
            if not os.path.exists(resolved):
                dead.append((rel, target, "no such file"))
            elif anchor and resolved.endswith(".md"):
                if resolved not in cache:
                    cache[resolved] = anchors(resolved)
                if anchor not in cache[resolved]:
                    dead.append((rel, target, "no heading with this anchor"))
    return dead


class DocLinksTest(unittest.TestCase):
    def test_slug_follows_github(self):
        self.assertEqual(slug("How to run"), "how-to-run")
        self.assertEqual(slug("Fifteenth pass (2cef1e8, df5df5b): the scores stay"),
                         "fifteenth-pass-2cef1e8-df5df5b-the-scores-stay")
        self.assertEqual(slug("`qsa replay` exit codes"), "qsa-replay-exit-codes")

    def test_finds_a_dead_link(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "a.md"), "w") as f:
                f.write("# Title\n\n[ok](#title) [gone](b.md) [bad](#nothing) `[code](x.md)`\n")
            found = sorted(link for _, link, _ in dead_links(tmp))
            self.assertEqual(found, ["#nothing", "b.md"])

    def test_repository_links_resolve(self):
        dead = dead_links(ROOT)
        self.assertEqual(dead, [], "dead links:\n" + "\n".join(f"  {f}: ({t}) {why}" for f, t, why in dead))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
