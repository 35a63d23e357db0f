#!/usr/bin/env python3
"""Fails on a broken internal link in the built manual and in top-level Markdown files.

--book DIR: every href and src of every HTML page under DIR (mdBook's output) that is relative
must name a file that exists, and its #fragment an id (or name) in that file. print.html, which
mdBook builds by rewriting every chapter's links onto one page, is checked like the others.
Markdown files given as arguments (README.md, ARCHITECTURE.md): every relative link outside code
must name an existing file, and a #fragment in a Markdown target must be one of its headings'
GitHub anchors. External links (http:, https:, mailto:) are not fetched.
"""
import argparse
import html.parser
import os
import re
import sys
import urllib.parse

EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name"):
                self.ids.add(value)
            if (name == "href" and tag in ("a", "link")) or (name == "src" and tag in ("img", "script")):
                self.links.append(value)


def parse(path, cache={}):
    if path not in cache:
        page = Page()
        with open(path, encoding="utf-8") as f:
            page.feed(f.read())
        cache[path] = page
    return cache[path]


def check_book(book):
    errors = []
    for root, _, files in os.walk(book):
        for name in files:
            if not name.endswith(".html"):
                continue
            path = os.path.join(root, name)
            for link in parse(path).links:
                if EXTERNAL.match(link) or link.startswith("//"):
                    continue
                target, _, fragment = link.partition("#")
                target = urllib.parse.unquote(target.split("?")[0])
                if target.startswith("/"):
                    errors.append(f"{path}: absolute link {link}")
                    continue
                file = os.path.normpath(os.path.join(root, target)) if target else path
                if os.path.isdir(file):
                    file = os.path.join(file, "index.html")
                if not os.path.exists(file):
                    errors.append(f"{os.path.relpath(path, book)}: {link}: no such file")
                    continue
                fragment = urllib.parse.unquote(fragment)
                if fragment and file.endswith(".html") and fragment not in parse(file).ids:
                    errors.append(f"{os.path.relpath(path, book)}: {link}: no #{fragment} there")
    return errors


def github_anchor(heading, seen):
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    slug = "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


def markdown(path):
    """(links, anchors) of a Markdown file, outside fenced code and inline code."""
    links, anchors, seen, fence = [], set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            if fence:
                continue
            m = re.match(r"^#{1,6} (.*)", line)
            if m:
                anchors.add(github_anchor(m.group(1), seen))
            text = re.sub(r"`[^`]*`", "", line)
            links += re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)
    return links, anchors


def check_markdown(path):
    errors = []
    base = os.path.dirname(path) or "."
    for link in markdown(path)[0]:
        if EXTERNAL.match(link):
            continue
        target, _, fragment = link.partition("#")
        file = os.path.normpath(os.path.join(base, urllib.parse.unquote(target))) if target else path
        if not os.path.exists(file):
            errors.append(f"{path}: {link}: no such file")
        elif fragment and file.endswith(".md") and fragment not in markdown(file)[1]:
            errors.append(f"{path}: {link}: no heading #{fragment} in {file}")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--book", help="mdBook output directory")
    ap.add_argument("markdown", nargs="*")
    args = ap.parse_args()
    errors = check_book(args.book) if args.book else []
    for path in args.markdown:
        errors += check_markdown(path)
    for e in errors:
        print(f"broken link: {e}", file=sys.stderr)
    if errors:
        sys.exit(f"check_links: {len(errors)} broken internal link(s)")
    print(f"check_links: every internal link resolves ({args.book or 'no book'}, {', '.join(args.markdown)})")


if __name__ == "__main__":
    main()
