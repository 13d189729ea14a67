"""The status page of a real daemon against the real control plane, read by a real browser
(Debian's chromium, headless, JavaScript off): a person's kubectl edit appears on the
source's page with its live and git values and its manager, a reconcile heals it, a hostile
value is shown as text and cut, and a Secret's value is nowhere in the page's source."""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By

from tests.harness.browser import BrowserBinaries, chromium
from tests.harness.canary import Canary
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.controlplane import free_port
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_files_with_data
from tests.harness.waiting import wait_for

HOSTILE = "<script>document.title='pwned'</script>\"quoted\" & 'single'" + "x" * 10_000
SCREENSHOT_VARIABLE = "GITOPSD_SCREENSHOT"
"""When set, the page's screenshot is also saved there (docs/images/status-page.png)."""


def secret_file(name: str, value: str) -> dict[str, str]:
    return {
        f"{name}.yaml": f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n"
        f"stringData:\n  token: {json.dumps(value)}\n"
    }


def page_daemon(daemons: Daemons, url: str, **page: Any) -> DaemonProcess:
    """A daemon keeping `app` (hourly, no selfHeal: a drift stays until a sync) with its
    status page on a free loopback port, reloading itself every second."""
    settings = {"listen": f"127.0.0.1:{free_port()}", "refresh": "1s", **page}
    return daemons.start(url, top={"statusPage": settings}, interval="1h", selfHeal=False)


def page_url(daemon: DaemonProcess) -> str:
    return f"http://{daemon.config['statusPage']['listen']}"


def fetch(url: str, method: str = "GET", token: str = "") -> tuple[int, dict[str, str], str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, method=method, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


class Cells(HTMLParser):
    """The text of each table cell of a page, as the browser holds it now: read in one call
    (page_source), as the page reloads itself every second and elements go stale."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.found: list[str] = []
        self.inside = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "td":
            self.found.append("")
            self.inside = True

    def handle_endtag(self, tag: str) -> None:
        self.inside = self.inside and tag != "td"

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.found[-1] += data


def cells(driver: Any) -> list[str]:
    return Cells(driver.page_source).found


def followed(driver: Any, label: str) -> bool:
    try:
        driver.find_element(By.LINK_TEXT, label).click()
    except (NoSuchElementException, StaleElementReferenceException):  # reloading
        return False
    return True


def test_a_person_s_edit_shows_on_the_source_s_page_in_a_browser_and_heals(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    canary: Canary,
    browser_binaries: BrowserBinaries,
    tmp_path: Path,
) -> None:
    git_repo.commit({**config_map_files_with_data("a"), **secret_file("token", canary.value)})
    daemon = page_daemon(daemons, git_server.file_url(git_repo))
    at = page_url(daemon)
    edited = Canary.fresh()

    with chromium(browser_binaries, tmp_path / "profile", tmp_path / "chromedriver.log") as driver:
        driver.get(at)
        wait_for(lambda: "Succeeded" in cells(driver), "the first sync on the overview", 60)
        wait_for(lambda: followed(driver, "app"), "a plain link followed, no script needed")
        assert driver.current_url == f"{at}/sources/app"
        assert "In sync with git." in driver.page_source

        patch = json.dumps({"data": {"k": HOSTILE}})
        gitopsd.kubectl("patch", "configmap/a", "-n", namespace, "--type=merge", "-p", patch)
        secret = json.dumps({"stringData": {"token": edited.value}})
        gitopsd.kubectl("patch", "secret/token", "-n", namespace, "--type=merge", "-p", secret)

        # no reload asked: the page's meta refresh brings the drift, JavaScript off
        wait_for(lambda: "kubectl-patch" in cells(driver), "the edit on the source's page", 30)
        wait_for(lambda: cells(driver).count("kubectl-patch") == 2, "both edits", 30)
        shown = cells(driver)
        row = shown.index("data.k")
        assert shown[row + 2 : row + 5] == ["v", "kubectl-patch", "heal"]
        live = shown[row + 1]
        assert live.startswith(HOSTILE[:200]) and live.endswith(f"… ({len(HOSTILE)} characters)")
        assert driver.find_elements(By.TAG_NAME, "script") == []
        assert driver.title == "gitopsd: app"  # the hostile script never ran
        source = driver.page_source
        assert "x" * 201 not in source
        token_row = shown.index("data.token")
        assert shown[token_row + 1 : token_row + 4] == ["***", "*** (changed)", "kubectl-patch"]
        canary.assert_absent(source, "the status page")
        edited.assert_absent(source, "the status page")
        save_screenshot(driver, tmp_path / "status-page.png")

        git_repo.commit(config_map_files_with_data("b"))  # a new revision: a sync heals
        reconciled = gitopsd("reconcile", "app", "--daemon", daemon.control_url)
        assert reconciled.code == 0, reconciled.text

        def healed() -> bool:
            driver.refresh()
            return "In sync with git." in driver.page_source

        wait_for(healed, "the source's page in sync again", 30)
        assert "kubectl-patch" not in cells(driver)
        assert cells(driver).count("Succeeded") >= 2  # the history's two syncs
        assert config_map_value(admin_api, namespace, "a") == "v"
        canary.assert_absent(driver.page_source, "the healed status page")


def save_screenshot(driver: Any, path: Path) -> None:
    """Into the test's directory; and where GITOPSD_SCREENSHOT says, if it is set."""
    assert driver.save_screenshot(str(path)), "no screenshot"
    wanted = os.environ.get(SCREENSHOT_VARIABLE)
    if wanted:
        shutil.copyfile(path, wanted)


def test_the_page_is_read_only_and_off_loopback_asks_for_its_token(
    daemons: Daemons, git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    token = tmp_path / "token"
    token.write_text("page-token\n")
    daemon = page_daemon(daemons, git_server.file_url(git_repo), tokenFile=str(token))
    at = page_url(daemon)

    status, headers, _ = fetch(at)
    assert (status, headers["WWW-Authenticate"]) == (401, 'Bearer realm="gitopsd"')
    wait_for(lambda: "Succeeded" in fetch(at, token="page-token")[2], "the first sync")
    status, headers, page = fetch(f"{at}/sources/app", token="page-token")
    assert status == 200 and "<h1>source app</h1>" in page
    assert headers["Content-Security-Policy"].startswith("default-src 'none'; style-src ")
    assert (headers["X-Frame-Options"], headers["Cache-Control"]) == ("DENY", "no-store")
    assert fetch(at, "POST", token="page-token")[0] == 405
    assert fetch(f"{at}/sources/nope", token="page-token")[0] == 404
    assert "page-token" not in daemon.logs()
