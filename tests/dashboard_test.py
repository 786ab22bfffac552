"""Drives the coordinator's dashboard in headless Chromium (selenium + chromedriver).

usage: dashboard_test.py URL JOB SCREENSHOT.png
The page must list the running JOB, show its timeline with measured actions and predicted
bubbles, the injected fault's SDC event naming rank 0 (dp 0) at step 3, memory per rank against
its budget, and show a job name full of markup as plain text.
"""
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

url, job, shot = sys.argv[1], sys.argv[2], sys.argv[3]
opts = webdriver.ChromeOptions()
opts.binary_location = "/usr/bin/chromium"
for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1500"):
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
    memory = [tr.text for tr in driver.find_elements(By.CSS_SELECTOR, "#memory tbody tr")]
    assert len(memory) == 2 and "MiB" in memory[0], memory
    print("memory rows:", memory)

    # A name full of markup stays text: no element made from it.
    marked = wait_for("the job with markup in its name", lambda: [
        td.text for td in driver.find_elements(By.CSS_SELECTOR, "#jobs tbody td") if "<b id=" in td.text])
    assert marked[0] == '<b id="x">bold</b><img src=x onerror=alert(1)>', marked
    assert not driver.find_elements(By.CSS_SELECTOR, "#jobs b, #jobs img, b#x"), "markup was rendered"
    driver.save_screenshot(shot)
    print("screenshot:", shot)
finally:
    driver.quit()
