#!/usr/bin/env python3
"""Opens a trainscope HTML report in a headless browser and checks that it is healthy.

    browser_check.py FILE.html [--min-charts N] [--screenshot OUT.png] [--window-size W,H]

A report page (reports/document.h) announces its own health: <body> carries
data-charts-expected (charts in the page), and once its script has drawn them data-charts-drawn
(charts Chart.js created with a non-zero size) and data-errors (window errors, unhandled
rejections, console.error calls, charts that failed, loads the page's policy blocked), with the
messages in <pre id="ts-errors">. The browser runs the page (--dump-dom, with a virtual time
budget so its scripts finish) and this script reads those attributes from the DOM it dumps.

The page passes when errors == 0 and drawn == expected >= N, and when it references nothing on
the network (no http://, https:// or //host in src, href and the like, nor in CSS url() or
@import), in the file and in the DOM after its scripts ran.

The browser: $TRAINSCOPE_BROWSER, else the first of chromium-headless-shell, chromium,
chromium-browser, google-chrome, google-chrome-stable, chrome-headless-shell on PATH (Debian:
apt-get install chromium-headless-shell; scripts/setup installs it). Run as root, it gets
--no-sandbox. Every run uses a throwaway profile (--user-data-dir) and cannot resolve any host.

Exit 0: healthy; 1: not (what was found is printed); 2: usage, or the browser could not be run;
77: no browser installed (ctest's SKIP_RETURN_CODE).
"""
import argparse
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile

BROWSERS = ["chromium-headless-shell", "chromium", "chromium-browser", "google-chrome",
            "google-chrome-stable", "chrome-headless-shell"]

# Attributes that make a browser load something.
URL_ATTRIBUTES = {"src", "href", "srcset", "action", "formaction", "poster", "data", "background",
                  "xlink:href", "manifest", "ping", "cite", "longdesc", "icon"}
NETWORK_URL = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
CSS_NETWORK = re.compile(r"""(url\(\s*['"]?\s*(https?:)?//|@import\s+['"]?\s*(url\()?\s*['"]?\s*(https?:)?//)""",
                         re.IGNORECASE)


class PageScan(html.parser.HTMLParser):
    """Body attributes, the #ts-errors text and network references of one HTML document."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.body = None
        self.errors_text = None
        self.network = []
        self._in_errors = False
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attrs_d = {k.lower(): (v or "") for k, v in attrs}
        if tag == "body" and self.body is None:
            self.body = attrs_d
        if tag == "pre" and attrs_d.get("id") == "ts-errors":
            self._in_errors = True
            self.errors_text = ""
        if tag == "style":
            self._in_style = True
        for name, value in attrs_d.items():
            if name in URL_ATTRIBUTES and any(NETWORK_URL.match(part.strip().split(" ")[0] or " ")
                                               for part in value.split(",")):
                self.network.append(f"<{tag} {name}=\"{value}\">")
            if name == "style" and CSS_NETWORK.search(value):
                self.network.append(f"<{tag} style=\"{value}\">")
        if tag == "meta" and attrs_d.get("http-equiv", "").lower() == "refresh" and "url=" in attrs_d.get("content", "").lower():
            self.network.append(f"<meta http-equiv=refresh content=\"{attrs_d.get('content')}\">")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag == "pre":
            self._in_errors = False
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_errors:
            self.errors_text += data
        if self._in_style:
            m = CSS_NETWORK.search(data)
            if m:
                self.network.append(f"<style>...{m.group(0)}...")


def scan(text):
    p = PageScan()
    p.feed(text)
    p.close()
    return p


def find_browser():
    override = os.environ.get("TRAINSCOPE_BROWSER")
    if override:
        path = shutil.which(override)
        return path, f"TRAINSCOPE_BROWSER={override}"
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path, name
    return None, None


def browser_command(browser, profile, extra):
    cmd = [browser, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
           "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
           f"--user-data-dir={profile}",
           # Offline: no host resolves, so nothing could be fetched even if the page tried.
           "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost",
           "--virtual-time-budget=10000"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--no-sandbox")
    return cmd + extra


def run_browser(browser, extra, url, timeout):
    with tempfile.TemporaryDirectory(prefix="trainscope_browser_") as profile:
        cmd = browser_command(browser, profile, extra) + [url]
        try:
            return cmd, subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                       stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return cmd, None


def as_int(body, name):
    try:
        return int(body.get(name, ""))
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="the HTML page")
    ap.add_argument("--min-charts", type=int, default=0, help="fail when the page has fewer charts than this")
    ap.add_argument("--screenshot", metavar="OUT.png", help="also save a screenshot of the page")
    ap.add_argument("--window-size", default="1280,1800", help="for the screenshot: W,H in CSS pixels")
    ap.add_argument("--timeout", type=float, default=90, help="seconds the browser may take")
    args = ap.parse_args()

    if not os.path.isfile(args.file):
        print(f"ERROR: no such file: {args.file}")
        return 2
    with open(args.file, encoding="utf-8", errors="replace") as f:
        source = f.read()

    browser, name = find_browser()
    if browser is None:
        print("SKIP: no headless browser found (tried " + ", ".join(BROWSERS) + "; set TRAINSCOPE_BROWSER, "
              "or apt-get install chromium-headless-shell: scripts/setup does)")
        return 77

    problems = []
    static = scan(source)
    for ref in static.network:
        problems.append(f"the file references the network: {ref}")

    url = "file://" + os.path.abspath(args.file)
    cmd, result = run_browser(browser, ["--dump-dom"], url, args.timeout)
    print(f"browser: {name} ({browser})")
    print("command: " + " ".join(cmd))
    if result is None:
        print(f"ERROR: the browser did not finish within {args.timeout:g} s")
        return 2
    if result.returncode != 0 or "<body" not in result.stdout:
        print(f"ERROR: the browser exited {result.returncode} without a DOM; its stderr ends:")
        print("\n".join(result.stderr.strip().splitlines()[-15:]))
        return 2

    dom = scan(result.stdout)
    body = dom.body or {}
    expected = as_int(body, "data-charts-expected")
    drawn = as_int(body, "data-charts-drawn")
    errors = as_int(body, "data-errors")
    messages = [m for m in (dom.errors_text or "").splitlines() if m.strip()]
    print(f"page: {args.file}")
    print(f"charts expected: {expected}, drawn: {drawn}, errors: {errors}")
    for m in messages:
        print(f"  error: {m}")

    for ref in dom.network:
        if ref not in static.network:
            problems.append(f"the page's DOM references the network: {ref}")
    if expected is None or drawn is None or errors is None:
        problems.append("the page did not report its health (no data-charts-expected, data-charts-drawn or "
                        "data-errors on <body>): its script did not run to the end")
    else:
        if errors != 0:
            problems.append(f"{errors} error(s) in the page")
        if drawn != expected:
            problems.append(f"{drawn} of {expected} charts drawn")
        if expected < args.min_charts:
            problems.append(f"{expected} charts in the page, fewer than --min-charts {args.min_charts}")

    if args.screenshot:
        out = os.path.abspath(args.screenshot)
        _, shot = run_browser(browser, [f"--screenshot={out}", f"--window-size={args.window_size}"], url,
                              args.timeout)
        if shot is None or shot.returncode != 0 or not os.path.isfile(out):
            problems.append(f"no screenshot written to {out}")
        else:
            print(f"screenshot: {out}")

    if problems:
        for p in problems:
            print(f"FAIL: {p}")
        return 1
    print(f"OK: {drawn} chart(s) drawn, no errors, no network references")
    return 0


if __name__ == "__main__":
    sys.exit(main())
