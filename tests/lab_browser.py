"""Drive a real JupyterLab with the system Chromium (Playwright, headless), the network closed except 127.0.0.1.

A test opens a notebook, runs every cell as a user would (Run > Run All Cells), then checks what a user sees::

    with JupyterLab(ROOT) as lab:
        page = lab.run_notebook('nbs/82_widgets.ipynb')
        assert_plots_drawn(page.locator('.kl-reward-plot'))

or, in one call, `check_notebook('experiments/01_sft_from_experts.ipynb', lambda page: assert_plots_drawn(page))`.
Playwright never downloads a browser here: it launches `/usr/bin/chromium` (Debian's `chromium` package).
`exported_html` renders a notebook to standalone HTML with nbconvert for the same checks on `file://`.
"""
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

CHROMIUM = os.environ.get('KNOWLYR_CHROMIUM', '/usr/bin/chromium')
LOCAL_HOSTS = {'127.0.0.1', 'localhost'}

def unavailable()->str|None:
    "Why the browser tests cannot run here (None when they can)"
    if not Path(CHROMIUM).exists(): return f"no system Chromium at {CHROMIUM} (apt-get install chromium; tools/setup_system.sh does it)"
    for mod, extra in (('playwright', 'lab'), ('jupyterlab', 'lab'), ('nbconvert', 'lab'), ('ipywidgets', 'widgets'), ('plotly', 'widgets')):
        if importlib.util.find_spec(mod) is None: return f"{mod} is not installed (pip install -e '.[{extra}]')"
    return None

def _free_port()->int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def _launch(pw):
    "Headless system Chromium that resolves no host but 127.0.0.1/localhost"
    return pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
        '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--no-first-run',
        '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost'])

def _offline_context(browser, blocked:list):
    "A browser context whose requests to anything but 127.0.0.1/localhost/file:// are aborted and listed in `blocked`"
    ctx = browser.new_context(viewport={'width': 1400, 'height': 1000})
    def route(r):
        u = urlparse(r.request.url)
        if u.scheme in ('file', 'data', 'blob') or u.hostname in LOCAL_HOSTS: return r.continue_()
        blocked.append(r.request.url); return r.abort()
    ctx.route('**/*', route)
    return ctx

class JupyterLab:
    "A JupyterLab server on 127.0.0.1 (its own config/runtime dirs) and a headless Chromium page source"
    def __init__(self, root:str|Path,      # the server's root dir: notebooks are opened by paths relative to it
                 timeout:float=120,        # seconds to wait for the server to answer
                 env:dict|None=None):      # extra environment for the server and its kernels
        self.root, self.timeout, self.extra_env = Path(root).resolve(), timeout, env or {}
        self.blocked, self.console = [], []

    def __enter__(self):
        from playwright.sync_api import sync_playwright
        self.tmp = Path(tempfile.mkdtemp(prefix='kl-lab-'))
        self.port, self.token = _free_port(), os.urandom(16).hex()
        env = {**os.environ, 'JUPYTER_CONFIG_DIR': str(self.tmp / 'config'), 'JUPYTER_RUNTIME_DIR': str(self.tmp / 'runtime'),
               'JUPYTER_DATA_DIR': str(self.tmp / 'data'), 'IPYTHONDIR': str(self.tmp / 'ipython'), 'MPLCONFIGDIR': str(self.tmp / 'mpl'),
               'PYTHONPATH': os.pathsep.join(filter(None, [str(self.root), os.environ.get('PYTHONPATH')])),
               'IN_TEST': '1',   # the notebooks' last cell (nbdev_export) does nothing: the checkout is not rewritten
               **self.extra_env}
        if 'PLOTLY_RENDERER' not in self.extra_env: env.pop('PLOTLY_RENDERER', None)   # what a user's JupyterLab does
        # every cell in the DOM (JupyterLab otherwise detaches cells scrolled out of view)
        settings = self.tmp / 'config' / 'lab' / 'user-settings' / '@jupyterlab' / 'notebook-extension'
        settings.mkdir(parents=True)
        (settings / 'tracker.jupyterlab-settings').write_text('{"windowingMode": "none"}')
        docs = settings.parent / 'docmanager-extension'   # never write the checkout's notebooks back
        docs.mkdir(parents=True)
        (docs / 'plugin.jupyterlab-settings').write_text('{"autosave": false}')
        self.log = open(self.tmp / 'server.log', 'w')
        self.server = subprocess.Popen([sys.executable, '-m', 'jupyterlab', '--no-browser', '--ServerApp.ip=127.0.0.1',
            f'--ServerApp.port={self.port}', '--ServerApp.port_retries=0', f'--IdentityProvider.token={self.token}',
            f'--ServerApp.root_dir={self.root}', '--LabApp.news_url=', '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate',
            '--LabApp.expose_app_in_browser=True', '--allow-root',
            # a server orphaned by a killed test stops by itself: idle kernels culled, then the idle server
            '--MappingKernelManager.cull_idle_timeout=900', '--MappingKernelManager.cull_interval=120',
            '--ServerApp.shutdown_no_activity_timeout=1200'], env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f'http://127.0.0.1:{self.port}'
        try:
            self._wait_ready()
            self.pw = sync_playwright().start()
            self.browser = _launch(self.pw)
            self.context = _offline_context(self.browser, self.blocked)
        except BaseException:
            self.__exit__(None, None, None); raise
        return self

    def _wait_ready(self):
        end = time.monotonic() + self.timeout
        while time.monotonic() < end:
            if self.server.poll() is not None: raise RuntimeError(f"jupyter lab exited ({self.server.returncode}):\n{self.server_log()}")
            try:
                with urllib.request.urlopen(f'{self.url}/api/status?token={self.token}', timeout=5) as r:
                    if r.status == 200: return
            except OSError: pass
            time.sleep(0.5)
        raise TimeoutError(f"jupyter lab did not answer on {self.url} within {self.timeout:.0f} s:\n{self.server_log()}")

    def server_log(self, tail:int=4000)->str:
        self.log.flush()
        return (self.tmp / 'server.log').read_text()[-tail:]

    def __exit__(self, *exc):
        for close in (lambda: self.context.close(), lambda: self.browser.close(), lambda: self.pw.stop()):
            try: close()
            except Exception: pass
        srv = getattr(self, 'server', None)
        if srv is not None and srv.poll() is None:
            os.killpg(srv.pid, signal.SIGTERM)   # the server and the kernels it started (its own session)
            try: srv.wait(20)
            except subprocess.TimeoutExpired: os.killpg(srv.pid, signal.SIGKILL); srv.wait(10)
        if getattr(self, 'log', None): self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def open(self, path:str):
        "Open the notebook at `path` (relative to root) in a new page; returns the page once its kernel is idle"
        page = self.context.new_page()
        page.on('console', lambda m: self.console.append(f'{m.type}: {m.text}'))
        page.on('pageerror', lambda e: self.console.append(f'pageerror: {e}'))
        page.goto(f'{self.url}/lab/tree/{path}?token={self.token}&reset', timeout=self.timeout * 1000)
        page.locator('.jp-NotebookPanel .jp-Notebook .jp-Cell').first.wait_for(timeout=self.timeout * 1000)
        self.wait_idle(page)
        return page

    def wait_idle(self, page, timeout:float|None=None):
        "Wait until the notebook's kernel is connected and idle"
        page.wait_for_function("""() => { const w = window.jupyterapp.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
            return !!k && k.connectionStatus === 'connected' && k.status === 'idle'; }""", timeout=(timeout or self.timeout) * 1000)

    def run_all(self, page, timeout:float=600):
        "Run > Run All Cells; wait until every code cell has run or one failed (then raise with its traceback)"
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")   # Run > Run All Cells
        page.wait_for_function("""() => {
            const cells = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell')];
            const failed = [...document.querySelectorAll('.jp-NotebookPanel [data-mime-type="application/vnd.jupyter.stderr"]')]
                .some(o => o.textContent.includes('Traceback'));
            const done = cells.length > 0 && cells.every(c => /\\[\\d+\\]/.test((c.querySelector('.jp-InputPrompt') || {}).textContent || ''));
            return failed || done;
        }""", timeout=timeout * 1000)
        errs = [t for t in page.locator('.jp-NotebookPanel [data-mime-type="application/vnd.jupyter.stderr"]').all_inner_texts() if 'Traceback' in t]
        if errs: raise AssertionError(f"a cell failed in JupyterLab:\n{errs[0][-3000:]}")
        self.wait_idle(page, timeout)
        return page

    def run_notebook(self, path:str, timeout:float=600):
        "Open `path`, run all its cells, return the page"
        page = self.open(path)
        self.run_all(page, timeout)
        return page

def assert_plots_drawn(scope, min_plots:int=1, min_points:int=1):
    "At least `min_plots` plotly figures under `scope` (a page or locator) have drawn SVG with data points"
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    plots = scope.locator('.js-plotly-plot')
    try: plots.first.wait_for(timeout=60_000)
    except PlaywrightTimeout: raise AssertionError("no plotly figure drew within 60 s (is plotly.js loaded? a CDN renderer draws nothing offline)") from None
    n = plots.count()
    assert n >= min_plots, f"{n} plotly figure(s) found, expected at least {min_plots}"
    for i in range(n):
        p = plots.nth(i)
        assert p.locator('.main-svg').count() >= 1, f"figure {i} has no SVG: plotly.js did not draw it"
        pts = p.locator('.trace .point, .trace path.js-line, .scatterlayer .trace path, .table .cell-text').count()
        assert pts >= min_points, f"figure {i} drew {pts} data marks, expected at least {min_points}"
    return n

def check_notebook(path:str, check, root:str|Path|None=None, timeout:float=600, env:dict|None=None):
    "Run the notebook at `path` (relative to `root`, default the repository) in JupyterLab (kernel environment + `env`), then `check(page)`"
    root = root or Path(__file__).resolve().parent.parent
    with JupyterLab(root, env=env) as lab:
        page = lab.run_notebook(path, timeout)
        check(page)
        assert not lab.blocked or all(urlparse(u).hostname not in LOCAL_HOSTS for u in lab.blocked)
        return lab.blocked

def exported_html(path:str|Path, out_dir:str|Path, timeout:int=600, renderer:str='plotly_mimetype+notebook')->Path:
    """Execute the notebook with nbconvert and write standalone HTML; `renderer` (PLOTLY_RENDERER) 'plotly_mimetype+notebook'
    embeds plotly.js once per page, so the file draws offline"""
    path, out_dir = Path(path).resolve(), Path(out_dir)
    env = {**os.environ, 'PLOTLY_RENDERER': renderer, 'IN_TEST': '1',
           'PYTHONPATH': os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get('PYTHONPATH')]))}
    r = subprocess.run([sys.executable, '-m', 'nbconvert', '--to', 'html', '--execute', f'--ExecutePreprocessor.timeout={timeout}',
                        '--output-dir', str(out_dir), str(path)], env=env, capture_output=True, text=True, cwd=path.parent)
    if r.returncode: raise RuntimeError(f"nbconvert failed on {path}:\n{r.stderr[-3000:]}")
    return out_dir / (path.stem + '.html')

def open_file(html_path:str|Path, check, lab:JupyterLab|None=None):
    """Open a local HTML file in offline headless Chromium and call `check(page)`; returns the blocked requests.
    Inside a `JupyterLab` session pass it as `lab` (one Playwright instance per thread)"""
    if lab is not None:
        n = len(lab.blocked)
        page = lab.context.new_page()
        try:
            page.goto(Path(html_path).resolve().as_uri()); check(page)
        finally: page.close()
        return lab.blocked[n:]
    from playwright.sync_api import sync_playwright
    blocked = []
    with sync_playwright() as pw:
        browser = _launch(pw)
        try:
            page = _offline_context(browser, blocked).new_page()
            page.goto(Path(html_path).resolve().as_uri())
            check(page)
        finally: browser.close()
    return blocked
