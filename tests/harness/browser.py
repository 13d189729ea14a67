"""A real browser: Debian's chromium, headless and with JavaScript off, driven by selenium
through Debian's chromedriver (tests/browser/provide.sh). Nothing is downloaded: selenium
is given both paths, and its manager is told to stay offline."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from tests.harness.controlplane import provided

PROVIDE_SCRIPT = Path(__file__).resolve().parent.parent / "browser" / "provide.sh"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
NO_JAVASCRIPT = {"profile.managed_default_content_settings.javascript": 2}


@dataclass(frozen=True)
class BrowserBinaries:
    chromium: Path
    chromedriver: Path


def provide_browser() -> BrowserBinaries:
    paths = provided(PROVIDE_SCRIPT)
    return BrowserBinaries(paths["CHROMIUM"], paths["CHROMEDRIVER"])


@contextmanager
def chromium(binaries: BrowserBinaries, profile: Path, log: Path) -> Iterator[Any]:
    """A headless chromium with a fresh profile in `profile` and JavaScript disabled, its
    driver's log in `log`; quit when the block ends."""
    os.environ["SE_OFFLINE"] = "true"  # selenium's manager: never fetch a driver or browser
    options = webdriver.ChromeOptions()
    options.binary_location = str(binaries.chromium)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", NO_JAVASCRIPT)
    service = Service(executable_path=str(binaries.chromedriver), log_output=str(log))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()
