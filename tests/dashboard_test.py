"""Drives the coordinator's dashboard in headless Chromium (selenium + chromedriver).

usage: dashboard_test.py URL JOB SCREENSHOT.png PIPECTL
The page must list the running JOB, show its timeline with measured actions and predicted
bubbles, the injected fault's SDC event naming rank 0 (dp 0) at step 3, memory per rank against
its budget, and show a job name full of markup as plain text. Then the job is cancelled and each
curve must hold exactly the points the job reported, as `pipectl status --format json` reads
them (not the page's own JSON): one per step record for loss, step time and bubble rate, one
per record with a prediction for the predicted curves, one per record with an idle split for
the four idle causes, one per record with that rank's peak for every rank's memory curve; the
last points and the budgets equal the job's. A rebalance suggestion is shown exactly when the
job has one.
"""
import json
import math
import subprocess
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

url, job, shot, pipectl = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
opts = webdriver.ChromeOptions()
opts.binary_location = "/usr/bin/chromium"
for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1900"):
    opts.add_argument(a)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
driver.set_page_load_timeout(20)


def wait_for(what, predicate, seconds=20):
    deadline = time.time() + seconds
    last = None
    while time.time() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:  # the page is still rendering
            last = e
        time.sleep(0.2)
    driver.save_screenshot(shot)
    raise AssertionError(f"{what}: not shown within {seconds} s (last: {last!r})")


def unstale(check, attempts=10):
    """Runs check() again when the page redrew an element it was reading (the dashboard polls and
    redraws; a read that straddles a redraw raises StaleElementReferenceException)."""
    for i in range(attempts):
        try:
            return check()
        except StaleElementReferenceException:
            if i == attempts - 1:
                raise
            time.sleep(0.2)


def job_status():
    out = subprocess.run([pipectl, "status", job, "--format", "json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def lines(chart, css="polyline.series"):
    """{data-series: element} of one chart's lines."""
    return {e.get_attribute("data-series"): e for e in driver.find_elements(By.CSS_SELECTOR, f"#{chart} {css}")}


def points(element):
    return int(element.get_attribute("data-points"))


def same(a, b):
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0)


try:
    driver.get(url)
    assert driver.title == "pipecoord dashboard", driver.title

    def running_row():
        for tr in driver.find_elements(By.CSS_SELECTOR, "#jobs tbody tr"):
            cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            if cells and cells[0] == job and cells[2] == "RUNNING":
                return cells
        return None

    cells = wait_for("the running job in the jobs table", running_row)
    print("jobs row:", cells)
    wait_for("the job's details", lambda: driver.find_element(By.ID, "job-id").text == job)
    workers = driver.find_elements(By.CSS_SELECTOR, "#workers tbody tr")
    assert len(workers) == 2, [w.text for w in workers]

    sdc = wait_for("the SDC event", lambda: [
        tr.text for tr in driver.find_elements(By.CSS_SELECTOR, "#events tbody tr.event-SDC")])
    print("event row:", sdc[0])
    assert sdc[0].startswith("SDC 0 (dp 0) 3 sdc: rank 0 (dp 0) step 3: probe checksum 0x"), sdc[0]

    def timeline():
        rects = driver.find_elements(By.CSS_SELECTOR, "#timeline rect")
        idle = driver.find_elements(By.CSS_SELECTOR, "#timeline rect.predicted-idle")
        return (len(rects) - len(idle), len(idle)) if len(idle) > 0 and len(rects) > len(idle) + 40 else None

    measured, predicted = wait_for("the timeline", timeline)
    print(f"timeline: {measured} measured actions, {predicted} predicted bubbles")
    memory = unstale(lambda: [tr.text for tr in driver.find_elements(By.CSS_SELECTOR, "#memory tbody tr")])
    assert len(memory) == 2 and "MiB" in memory[0], memory
    print("memory rows:", memory)

    # A name full of markup stays text: no element made from it.
    marked = wait_for("the job with markup in its name", lambda: [
        td.text for td in driver.find_elements(By.CSS_SELECTOR, "#jobs tbody td") if "<b id=" in td.text])
    assert marked[0] == '<b id="x">bold</b><img src=x onerror=alert(1)>', marked
    assert not driver.find_elements(By.CSS_SELECTOR, "#jobs b, #jobs img, b#x"), "markup was rendered"
    wait_for("the loss curve", lambda: points(lines("chart-loss")["loss"]) > 10)
    driver.save_screenshot(shot)
    print("screenshot:", shot)

    # The curves against what the job reported, once it stops growing.
    subprocess.run([pipectl, "cancel", job], check=True, capture_output=True)
    # A cancelled job takes no more telemetry: its steps are final.
    j = wait_for("the job cancelled", lambda: (lambda s: s if s.get("state") == "CANCELLED" else None)(job_status()))
    steps, plan = j["steps"], j["plan"]
    n, pp, dp = len(steps), j["spec"]["pp"], j["spec"].get("dp", 1)
    assert n > 10, n
    wait_for(f"the loss curve with the job's {n} steps", lambda: points(lines("chart-loss")["loss"]) == n)
    with_prediction = sum(1 for s in steps if s.get("predictedStepS", 0) > 0)
    with_split = sum(1 for s in steps if "idleTotal" in s)
    calibrated = "calibration" in j
    print(f"job: {n} steps, {with_prediction} with a prediction, {with_split} with an idle split, "
          f"calibrated: {calibrated}, rebalance: {'rebalance' in j}")

    def curves():
        loss = lines("chart-loss")["loss"]
        assert points(loss) == n and same(loss.get_attribute("data-last"), steps[-1].get("loss", 0)), \
            (points(loss), loss.get_attribute("data-last"), steps[-1])
        # Validation (spec.evalEvery): a point for each step that has one, the last one in the note.
        validated = [s for s in steps if s.get("hasValLoss")]
        if j["spec"].get("evalEvery", 0) > 0:
            assert len(validated) >= 2, [s.get("step", 0) for s in validated]
            val = lines("chart-loss")["validation loss"]
            assert points(val) == len(validated) and same(val.get_attribute("data-last"), validated[-1]["valLoss"]), \
                (points(val), val.get_attribute("data-last"), validated[-1])
            note = driver.find_element(By.ID, "note-loss").text
            assert note.startswith("validation loss %.4f nats (" % validated[-1]["valLoss"]), note
            print(f"validation curve: {points(val)} points, {note}")
        # The global gradient norm: a point per step, the last one the job's; the note names the last
        # step's learning rate.
        norm = lines("chart-grad-norm")["gradient norm"]
        assert points(norm) == n and same(norm.get_attribute("data-last"), steps[-1]["gradNorm"]), \
            (points(norm), norm.get_attribute("data-last"), steps[-1])
        note = driver.find_element(By.ID, "note-grad-norm").text
        lr = steps[-1]["learningRate"]  # JavaScript's toPrecision(4) for 1e-6 <= lr < 1
        assert note.startswith("learning rate %.*f at the last step" % (3 - math.floor(math.log10(lr)), lr)), note
        print(f"gradient norm curve: {points(norm)} points, {note}")
        name = "predicted (calibrated)" if calibrated else "predicted (plan)"
        for chart, measured_key in (("chart-step-time", "stepTimeS"), ("chart-bubble", "measuredBubbleRate")):
            got = lines(chart)
            assert set(got) == {"measured", name}, (chart, sorted(got))
            assert points(got["measured"]) == n, (chart, points(got["measured"]), n)
            assert same(got["measured"].get_attribute("data-last"), steps[-1].get(measured_key, 0)), chart
            assert points(got[name]) == with_prediction, (chart, points(got[name]), with_prediction)
        plan_level = lines("chart-bubble", "polyline.level")["plan"]
        assert same(plan_level.get_attribute("data-value"), plan.get("predictedBubbleRate", 0)), plan_level.get_attribute("data-value")
        note = driver.find_element(By.ID, "note-bubble").text
        assert calibrated or note.startswith("not calibrated yet"), note
        print("bubble note:", note)

        idle = lines("chart-idle")
        assert set(idle) == {"inherent", "imbalance", "variation", "comm"}, sorted(idle)
        assert all(points(e) == with_split for e in idle.values()), {k: points(e) for k, e in idle.items()}
        if not with_split:
            assert driver.find_element(By.ID, "note-idle").text == "no idle-time split reported yet"

        ranks = {int(e.get_attribute("data-rank")): e for e in lines("chart-memory").values()}
        assert sorted(ranks) == list(range(pp * dp)), sorted(ranks)
        for g, e in ranks.items():
            expected = sum(1 for s in steps if len(s.get("peakMemoryBytes", [])) > g)
            assert expected == n and points(e) == expected, (g, points(e), expected)
            assert int(e.get_attribute("data-last")) == int(steps[-1]["peakMemoryBytes"][g]), (g, e.get_attribute("data-last"))
        budgets = {e.get_attribute("data-series"): int(e.get_attribute("data-value"))
                   for e in lines("chart-memory", "polyline.level").values()}
        assert budgets == {f"budget {r}": int(b) for r, b in enumerate(plan["memoryBudgetBytes"])}, budgets
        detail = urllib.request.urlopen(f"{url}api/job?id={job}", timeout=10).read()
        print(f"/api/job: {len(detail)} bytes for {n} steps ({len(detail) / n:.0f} bytes per step, the rest included)")
        print(f"curves: loss {n}, step time and bubble {n} measured + {with_prediction} predicted, "
              f"idle 4 x {with_split}, memory {len(ranks)} ranks x {n}, budgets {budgets}")

    unstale(curves)

    # The rebalance suggestion: shown exactly when the job has one.
    box = driver.find_element(By.ID, "rebalance")
    if "rebalance" in j:
        layers = ",".join(str(x) for x in j["rebalance"]["stageLayers"])
        wait_for("the rebalance suggestion", lambda: box.is_displayed() and f"\u2192 {layers}" in box.text)
        print("rebalance:", box.text)
    else:
        assert not box.is_displayed(), box.text
    # The page's own rendering of what the coordinator fills once a job is calibrated, fed the
    # job's JSON with a proposal, a calibration, predictions from step 3 on and idle splits from
    # step 2 on added (the next poll redraws the real state).
    shown = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/api/job?id=' + encodeURIComponent(arguments[0])).then(r => r.json()).then(job => {
          job.rebalance = {current_stage_layers: [5, 3], stage_layers: [4, 4], schedule: '1f1b', current_step_s: 0.5,
                           proposed_step_s: 0.4, gain: 0.2, reason: '<b>rank 0</b> is slow'};
          job.calibration = {steps_measured: 3, predicted_step_s: 0.25, predicted_bubble_rate: 0.125, plan_step_s: 0.5};
          const s = job.series;
          s.predicted_step_s = s.step.map((_, i) => i >= 3 ? 0.25 : null);
          s.predicted_bubble = s.step.map((_, i) => i >= 3 ? 0.125 : null);
          for (const k of ['inherent_s', 'imbalance_s', 'variation_s', 'comm_s']) s.idle[k] = s.step.map((_, i) => i >= 2 ? -0.001 : null);
          s.idle.cause_rank = s.step.map(() => 1);
          showJob(job);
          const box = document.getElementById('rebalance');
          const count = (chart, name) => Number(document.querySelector(
              '#' + chart + ' polyline.series[data-series="' + name + '"]').getAttribute('data-points'));
          done([box.hidden, box.textContent, box.querySelectorAll('b').length, s.step.length,
                count('chart-step-time', 'predicted (calibrated)'), count('chart-bubble', 'predicted (calibrated)'),
                count('chart-idle', 'variation'),
                document.querySelector('#chart-step-time polyline.level').getAttribute('data-value'),
                document.getElementById('note-idle').textContent, document.getElementById('calibration').textContent]);
        });""", job)
    m = shown[3]
    assert shown == [False, "Rebalance suggestion layers per rank 5,3 \u2192 4,4 (1f1b): predicted step 500.00 ms "
                     "\u2192 400.00 ms, gain 20.0%. <b>rank 0</b> is slow", 0, m, m - 3, m - 3, m - 2, "0.5",
                     "last step: variation waits caused by rank 1",
                     "Calibrated on 3 measured steps: predicted step 250.00 ms, bubble 0.125 (plan 500.00 ms, "
                     f"{plan.get('predictedBubbleRate', 0):.3f})"], shown
    print("calibrated rendering (fed):", shown[9])
finally:
    driver.quit()
