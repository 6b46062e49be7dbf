"""The playground in headless Chromium (Debian's package, driven by Playwright; no browser download): a pasted
message scored with the moderation pack and a question of one's own, the bars and numbers it draws checked against
the API's answer to the same request, the plan, the copied request, the token, and a screenshot that is not blank.

Screenshots go to pytest's tmp folder, or to $SPINFC_SCREENSHOTS when set."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import httpx
import pytest

from spinfc.config import EngineSettings, ServerSettings, Settings
from spinfc.server.app import create_app

from packaged import load_shared

from .live import live_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "playground-token"
MESSAGE = "Congratulations! You won a $1000 gift card. Click this link and enter your bank password to claim it."
QUERIES = [{"id": "prize", "template": "\n\nDoes the message promise a prize?\nAnswer:<?>", "options": [" yes", " no"]}]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", warmup="short"),
                        server=ServerSettings(token=TOKEN))
    with live_server(create_app(settings, load_model=load_shared)) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (scripts/setup.sh does)")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("SPINFC_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_the_pages_and_assets_are_served_without_a_token_and_the_api_is_not(server):
    assert 'href="/playground"' in httpx.get(f"{server}/").text
    page = httpx.get(f"{server}/playground")
    assert page.status_code == 200 and "/playground/app.js" in page.text and "http" not in page.text.replace(
        'http-equiv', '')  # no asset from elsewhere
    assert httpx.get(f"{server}/playground/app.js").headers["content-type"].startswith("text/javascript")
    assert httpx.get(f"{server}/playground/nope.js").status_code == 404
    body = {"messages": [{"role": "user", "content": "x"}],
            "scoring": {"queries": [{"id": "q", "template": "Answer:<foo>", "options": [" a"]}]}}
    assert httpx.post(f"{server}/v1/plan", json=body).status_code == 401
    refused = httpx.post(f"{server}/v1/plan", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "unknown_slot"


def test_a_pasted_message_scored_with_the_moderation_pack(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.goto(f"{server}/playground")
    page.fill("#token", TOKEN)
    page.dispatch_event("#token", "change")
    page.wait_for_selector("#packs[data-loaded='yes']", timeout=60_000)
    page.check("#packs input[value='spinfc/moderation']", timeout=60_000)
    page.fill("#content", MESSAGE)
    page.fill("#queries", json.dumps(QUERIES))
    with page.expect_response("**/v1/score", timeout=600_000) as scored, \
            page.expect_response("**/v1/plan", timeout=600_000) as planned:
        page.click("#score")
    page.wait_for_selector("body[data-scored='yes']", timeout=600_000)
    answer, plan = scored.value.json(), planned.value.json()

    # the page sent this very request, and the API answers it so when asked directly (CPU sums may round apart
    # between a first and a later read of the same content, so to a tolerance)
    body = {"messages": [{"role": "user", "content": MESSAGE}], "scoring": {"queries": QUERIES},
            "packs": [{"id": "spinfc/moderation"}]}
    assert json.loads(scored.value.request.post_data) == body
    headers = {"Authorization": f"Bearer {TOKEN}"}
    direct = httpx.post(f"{server}/v1/score", json=body, headers=headers, timeout=600).json()
    assert direct["packs"][0]["categories"] == pytest.approx(answer["packs"][0]["categories"], abs=1e-4)

    # the question's options: the numbers and the bars' lengths are the API's p, the floor marks sit at floor_p
    (combo,) = answer["results"][0]["combinations"]
    rows = page.query_selector_all("[data-query='prize'] .row[data-kind='option']")
    assert len(rows) == 2
    for row, option in zip(rows, combo["options"]):
        assert float(row.get_attribute("data-value")) == pytest.approx(option["p"], abs=1e-9)
        assert float(row.get_attribute("data-floor")) == pytest.approx(option["floor_p"], abs=1e-9)
        track = row.query_selector(".track").bounding_box()
        bar, floor = row.query_selector(".bar").bounding_box(), row.query_selector(".floor").bounding_box()
        assert bar["width"] / track["width"] == pytest.approx(option["p"], abs=0.01)
        assert (floor["x"] - track["x"]) / track["width"] == pytest.approx(option["floor_p"], abs=0.01)
        assert f"{option['p']:.3f}" in row.inner_text()
    residual = page.query_selector("[data-query='prize'] [data-residual]")
    assert float(residual.get_attribute("data-residual")) == pytest.approx(combo["residual"], abs=1e-9)

    # the pack: every category a bar with its score, and the decision
    (pack,) = answer["packs"]
    card = page.query_selector("[data-pack='spinfc/moderation']")
    categories = card.query_selector_all(".row[data-kind='category']")
    assert [c.get_attribute("data-name") for c in categories] == list(pack["categories"])
    for row in categories:
        assert float(row.get_attribute("data-value")) == pytest.approx(pack["categories"][row.get_attribute("data-name")],
                                                                       abs=1e-9)
    assert card.query_selector("[data-decision]").get_attribute("data-decision") == pack["decision"]

    # the plan: passes, tokens and the dedupe saving, as /v1/plan says
    assert plan["passes"] >= 1 and plan["saving"] > 1 and plan["questions"] == 107
    assert page.inner_text("[data-plan='passes']").endswith(str(plan["passes"]))
    assert f"{plan['saving']:.2f}x" in page.inner_text("[data-plan='dedupe saving']")

    screenshot = shots(tmp_path) / "playground-moderation.png"
    page.screenshot(path=str(screenshot), full_page=True)
    from matplotlib.image import imread

    pixels = imread(screenshot)
    assert pixels.shape[0] > 500 and pixels.std() > 0.05  # not blank
    assert (abs(pixels[..., :3] - [0x2F / 255, 0x6F / 255, 0xB0 / 255]).sum(axis=-1) < 0.05).sum() > 200  # bars

    # the request copied as curl and as Python holds this very body
    page.click("#copy-curl")
    snippet = page.inner_text("#snippet")
    assert snippet.startswith(f"curl -s {server}/v1/score") and "Bearer $SPINFC_TOKEN" in snippet
    assert json.loads(snippet.split("-d '", 1)[1].rsplit("'", 1)[0]) == body
    page.click("#copy-python")
    snippet = page.inner_text("#snippet")
    assert "httpx.post" in snippet and "SPINFC_TOKEN" in snippet
    scope: dict = {}
    exec(snippet.split("response =")[0], scope)  # the body line, not the call
    assert scope["body"] == body
    page.close()


def test_without_the_token_the_page_says_so(server, browser, tmp_path):
    page = browser.new_page()
    page.goto(f"{server}/playground")
    page.wait_for_selector("#packs .error", timeout=60_000)
    assert "invalid_token" in page.inner_text("#packs")
    page.screenshot(path=str(shots(tmp_path) / "playground-no-token.png"))
    page.close()
