"""The workbench as a user sees it: notebooks run in a real JupyterLab, driven by headless system Chromium with no network.

About 1.5-2 minutes on a busy 2-core machine, so behind the `browser` flag: `KNOWLYR_TEST_FLAGS=browser pytest tests/test_browser.py`
(tools/run_tests.sh adds the flag when KNOWLYR_BROWSER=1). Needs Debian's `chromium` (tools/setup_system.sh) and the `lab` extra.
To check another notebook's figures: `check_notebook('experiments/X.ipynb', lambda page: assert_plots_drawn(page, 2))`.
"""
import os
import re
from pathlib import Path

import pytest
from lab_browser import JupyterLab, assert_plots_drawn, exported_html, open_file, unavailable

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.skipif('browser' not in os.environ.get('KNOWLYR_TEST_FLAGS', '').split(),
                                 reason="needs the 'browser' component (KNOWLYR_TEST_FLAGS='browser')"),
              pytest.mark.skipif(bool(unavailable()), reason=str(unavailable()))]

@pytest.fixture(scope='module')
def lab():
    with JupyterLab(ROOT) as lab:
        yield lab
        assert not lab.blocked or all('127.0.0.1' not in u for u in lab.blocked)

def test_stepper_steps_and_plots_in_jupyterlab(lab):
    n_blocked = len(lab.blocked)
    page = lab.run_notebook('nbs/82_widgets.ipynb')
    stepper = page.locator('.kl-stepper')
    assert stepper.count() == 1
    obs = stepper.locator('.kl-observation')
    before = obs.inner_text()
    stepper.locator('.kl-step').click()
    page.wait_for_function("([el, old]) => el.innerText !== old", arg=[obs.element_handle(), before], timeout=60_000)
    assert obs.inner_text().startswith('You moved'), obs.inner_text()
    assert stepper.locator('.kl-status').inner_text().startswith('step 1')
    # the reward curve redrawn for the new step: one bar per reward component, one point on the cumulative line
    plot = stepper.locator('.kl-reward-plot')
    page.wait_for_function("el => el.querySelectorAll('.js-plotly-plot .main-svg').length > 0", arg=plot.element_handle(), timeout=60_000)
    assert_plots_drawn(plot)
    assert plot.locator('.barlayer .trace .point').count() >= 1
    # the live training-curve widget and the static curves drew too
    assert_plots_drawn(page.locator('.kl-training-curves'))
    assert_plots_drawn(page, min_plots=3)
    assert not lab.blocked[n_blocked:], f"JupyterLab asked the network for: {lab.blocked[n_blocked:][:5]}"

def test_trajectory_card_keeps_its_own_table_layout_in_jupyterlab(lab):
    page = lab.run_notebook('nbs/81_viewer.ipynb')
    table = page.locator('.kl-traj table').first
    table.wait_for()
    style = table.evaluate("""t => { const td = t.querySelector('td'), s = getComputedStyle(t), c = getComputedStyle(td);
        return {layout: s.tableLayout, align: c.textAlign, valign: c.verticalAlign, wordBreak: c.wordBreak,
                widths: [...t.querySelectorAll('tr')[0].children].map(e => e.getBoundingClientRect().width)}; }""")
    assert style['layout'] == 'auto' and style['align'] == 'left' and style['valign'] == 'top' and style['wordBreak'] == 'normal', style
    w = style['widths']   # '#', thought, tool call, observation, reward
    assert len(w) == 5 and w[0] < 0.5 * w[2] < w[3] and max(w) - min(w) > 50, f"column widths {w}: JupyterLab's fixed equal columns"
    warn = page.locator('.kl-traj .kl-warn')
    assert warn.count() == 1 and warn.is_visible() and 'not isolated' in warn.inner_text()

def test_exported_html_draws_offline(lab, tmp_path):
    html = exported_html(ROOT / 'nbs' / '80_plots.ipynb', tmp_path)
    text = html.read_text()
    assert len(re.findall(r'plotly\.js v\d', text)) == 1, "plotly.js must be embedded exactly once per page"
    assert not re.search(r'<script[^>]+src="[^"]*plotly', text), "plotly.js must not come from the network"
    # (nbconvert's template still links require.js and MathJax from a CDN: blocked below, and the figures draw without them)
    drawn = []
    blocked = open_file(html, lambda page: drawn.append(assert_plots_drawn(page, min_plots=4)), lab=lab)
    assert drawn and not [u for u in blocked if 'plot' in u], (drawn, blocked[:5])

def test_demo_report_opens_with_the_learning_curve_and_the_conclusion(tmp_path):
    "#27: the report led with unformatted tables; its first screen (1280x800) must be the conclusion and the learning curve"
    from knowlyr_lab.demo import run_experiment_1
    res = run_experiment_1(tmp_path / 'demo', size='ci', log=None)   # the real report of a CI-sized demo run (about a minute)
    shot = Path(os.environ.get('KNOWLYR_SCREENSHOT_DIR', tmp_path)) / 'report-first-screen.png'
    seen = {}
    def check(page):
        page.set_viewport_size({'width': 1280, 'height': 800})
        lead = page.locator('#lead-figure')
        assert_plots_drawn(lead)
        seen['conclusion'] = page.locator('#conclusion').inner_text()
        seen['figure'] = lead.locator('h3').inner_text()
        seen['boxes'] = {k: page.locator(sel).first.bounding_box() for k, sel in
                         (('conclusion', '#conclusion'), ('figure', '#lead-figure .js-plotly-plot'), ('table', 'table'))}
        page.screenshot(path=str(shot))
    blocked = open_file(tmp_path / 'demo' / 'report.html', check)
    assert not [u for u in blocked if 'plot' in u], blocked[:5]
    b = seen['boxes']
    assert seen['conclusion'].strip() == res['conclusion'] and seen['figure'].startswith('Held-out success vs demonstrations'), seen
    assert b['conclusion']['y'] + b['conclusion']['height'] <= 800 and b['figure']['y'] + b['figure']['height'] <= 800, b   # both on the first screen
    assert b['table']['y'] >= b['figure']['y'] + b['figure']['height'], b                                                   # tables come after
    text = (tmp_path / 'demo' / 'report.html').read_text()
    assert not re.search(r'<td>\d\.\d{4,}</td>|<td>\d(\.\d+)?e-\d+</td>', text), "unformatted rates or p-values in a table"
    assert shot.stat().st_size > 10_000
