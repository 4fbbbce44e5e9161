"""`transcript report`: the HTML page of a session, read as a page (its DOM) and opened in headless
Chromium with networking off.

The browser tests drive Debian's `chromium` through its `chromedriver` with Selenium: they click the
plot's points as a person would and read what the page then shows. Without Chromium they skip, unless
$CI is set: CI installs it (`.ci/run`), so there a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CORPUS
from tests.test_cli import BUDGET, SIM, SWE_FC, run, run_json
from transcript import Message, Transcript
from transcript.cli.options import EXIT_USAGE

EVIL = "</script><script>alert(1)</script>"
EVIL_TAG = "<img src=x onerror=alert(2)><b>bold?</b>"
LIMIT = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def sim_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The marshmallow run simulated at a tight budget: 13 model calls, three compactions."""
    db = tmp_path_factory.mktemp("report") / "sim.db"
    run(["simulate", SWE_FC, "--budget", BUDGET, "--db", db])
    return db


@pytest.fixture(scope="module")
def page(sim_db: Path) -> Path:
    out = sim_db.parent / "report.html"
    run(["report", "--db", sim_db, "-o", out])
    return out


@pytest.fixture(scope="module")
def evil_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session whose stored text is markup meant to run: the page must show it as text."""
    where = tmp_path_factory.mktemp("evil")
    db = where / "evil.db"
    with Transcript.open(db, session_id="evil") as t:
        t.append(Message.user(f"look: {EVIL} and {EVIL_TAG}"))
        t.append(Message.assistant(f"I see {EVIL}"))
        t.append(Message.user("again"))
        t.append(Message.assistant("done"))
    out = where / "evil.html"
    run(["report", "evil", "--db", db, "-o", out])
    return out


def _points(db: Path, kind: str) -> list[dict[str, Any]]:
    return [p for p in run_json(["replay", "--db", db, "--format", "json"]) if p["kind"] == kind]


def test_the_page_is_one_file_that_fetches_nothing(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "default-src 'none'" in text  # and the policy forbids fetching anything at all
    assert len(re.findall(r"<script\b", text)) == 2  # the data block and the page's own code


def test_stored_text_cannot_close_the_data_block(evil_page: Path) -> None:
    text = evil_page.read_text(encoding="utf-8")
    assert EVIL not in text and "<img" not in text
    block = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.DOTALL)
    assert block is not None
    data = json.loads(block.group(1))  # the escapes are JSON's: the text comes back exact
    assert any(EVIL in json.dumps(m, ensure_ascii=False) for m in data["messages"])


def test_the_largest_corpus_session_makes_a_page_under_5_mb(tmp_path: Path) -> None:
    largest = max(
        (p for p in CORPUS.iterdir() if p.suffix in (".jsonl", ".json", ".traj")), key=os.path.getsize
    )
    db = tmp_path / "big.db"
    run(["import", largest, "--db", db])
    biggest = max(run_json(["sessions", "--db", db, "--format", "json"]), key=lambda s: s["stored_tokens"])
    out = tmp_path / "big.html"
    run(["report", "--db", db, "--session", biggest["session_id"], "-o", out])
    assert 0 < out.stat().st_size <= LIMIT, out.stat().st_size
    calls = out.read_text(encoding="utf-8").count("<circle class='call'")
    assert calls == len(_calls(db, biggest["session_id"])) > 0


def _calls(db: Path, session: str) -> list[dict[str, Any]]:
    points = run_json(["replay", "--db", db, "--session", session, "--format", "json"])
    return [p for p in points if p["kind"] == "model-call"]


def test_report_names_its_session_once(sim_db: Path) -> None:
    run(["report", SIM, "--session", SIM, "--db", sim_db], code=EXIT_USAGE)


# In Chromium.


def _browser_or_skip() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        selenium_missing = True
    else:
        selenium_missing = False
    missing = [
        name
        for name, absent in (
            ("chromium", chromium is None),
            ("chromedriver", driver is None),
            ("selenium", selenium_missing),
        )
        if absent
    ]
    if missing:
        why = f"headless Chromium is not available here (missing: {', '.join(missing)})"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI installs it (.ci/run), so it must be there")
        pytest.skip(why)
    assert chromium is not None and driver is not None
    return chromium, driver


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium, driver_path = _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1100",
        # Networking off: no name resolves, and every connection goes to a proxy that is not there.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        "--disable-background-networking",
        "--no-first-run",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        driver.set_network_conditions(offline=True, latency=0, download_throughput=0, upload_throughput=0)
        yield driver
    finally:
        driver.quit()


def _open(browser: Any, path: Path) -> None:
    browser.get(path.as_uri())
    assert browser.execute_script("return document.body.dataset.ready") == "yes"  # the page's code ran


def _click_call(browser: Any, i: int) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, f'circle.call[data-call="{i}"]').click()


def _shown(browser: Any) -> Any:
    return json.loads(browser.execute_script("return document.getElementById('view-json').textContent"))


def test_the_plot_has_a_point_per_model_call_and_a_marker_per_compaction(
    browser: Any, page: Path, sim_db: Path
) -> None:
    _open(browser, page)
    calls = _points(sim_db, "model-call")
    compactions = _points(sim_db, "compact")
    assert len(calls) == 13 and len(compactions) == 4
    circles = browser.execute_script(
        "return [...document.querySelectorAll('circle.call')].map(c => Number(c.dataset.point))"
    )
    assert circles == [p["point"] for p in calls]
    markers = browser.execute_script(
        "return [...document.querySelectorAll('g.compaction')].map(g => Number(g.dataset.point))"
    )
    assert markers == [p["point"] for p in compactions]
    # Nothing was fetched: the document is the only resource the page has.
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0


def test_a_click_on_a_point_shows_the_view_replay_at_prints(browser: Any, page: Path, sim_db: Path) -> None:
    _open(browser, page)
    for i, call in enumerate(_points(sim_db, "model-call")):
        _click_call(browser, i)
        assert browser.execute_script("return document.body.dataset.shown") == str(call["point"])
        expected = run_json(["replay", "--db", sim_db, "--at", call["point"], "--format", "json"])
        assert _shown(browser) == expected, call["point"]
        shown = browser.execute_script("return document.querySelectorAll('#view article.message').length")
        assert shown == len(expected["messages"])
    # After a full compaction, the diff names what left the view.
    first = next(p["point"] for p in _points(sim_db, "compact") if p["result"]["outcome"] == "full_applied")
    after = next(i for i, c in enumerate(_points(sim_db, "model-call")) if c["point"] > first)
    _click_call(browser, after)
    assert browser.execute_script("return document.querySelectorAll('#diff li.gone').length") > 0


def test_markup_in_a_message_renders_as_text_and_runs_nothing(browser: Any, evil_page: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    _open(browser, evil_page)
    _click_call(browser, 0)
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018 (reading it is the check)
    texts = browser.execute_script(
        "return [...document.querySelectorAll('#view article.message pre')].map(p => p.textContent)"
    )
    assert texts == [f"look: {EVIL} and {EVIL_TAG}"]
    assert browser.execute_script("return document.scripts.length") == 2
    assert browser.execute_script("return document.querySelectorAll('img, b, #view script').length") == 0
    _click_call(browser, 1)
    assert f"I see {EVIL}" in browser.execute_script("return document.getElementById('view').textContent")


def test_a_screenshot_of_the_page(browser: Any, page: Path, sim_db: Path, tmp_path: Path) -> None:
    _open(browser, page)
    _click_call(browser, 6)  # the first call after the first compaction
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    if os.environ.get("TRANSCRIPT_REPORT_SCREENSHOT"):  # how the README's picture is made
        shutil.copy(shot, os.environ["TRANSCRIPT_REPORT_SCREENSHOT"])
