"""Progress bars driven by the Dask tasks themselves, on any scheduler.

``with daskauc.progress("fit NSAUC"):`` shows, on stderr, one line that redraws itself: the
step, the solver's own count (``epoch 3/20``, ``Newton step 4``) when it reports one, a bar
of the tasks finished out of those submitted since the step began, and the seconds so far.
daskauc's log lines (one per epoch or Newton step, with the validation AUC when there is one)
are printed above the bar while it runs. On a distributed cluster the tasks are counted by a
small scheduler plugin (``daskauc-progress``, registered on first use; it counts every
client's tasks, so a shared cluster's other work shows in the bar too); under the threaded
or synchronous scheduler by a dask callback. Without a terminal (a log file, CI) nothing is
redrawn: the step's start and end are printed as lines.

The first bar on a distributed cluster prints the dashboard link first. In a Jupyter kernel
the bar is an IPython display updated in place.

A model search (``C="auto"``, KernelAUC's choices, cross-validation) runs under
:func:`search_progress`: one INFO line per candidate (its validation AUC, the best so far,
``i/N``, the time left), the search on the bar, and the solvers' own step lines at DEBUG
meanwhile (:func:`solver_log_level`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time

from distributed.diagnostics.plugin import SchedulerPlugin

from .._compute import callback_registered, register_callback, unregister_callback

logger = logging.getLogger("daskauc")

#: seconds between redraws of a bar on a terminal
REFRESH = 0.2
PLUGIN_NAME = "daskauc-progress"

_lock = threading.RLock()
_active: list[Progress] = []  # nested progress contexts; the outermost draws
_announced: set[str] = set()  # dashboard links already printed
_searches: list[SearchProgress] = []  # model searches running; the innermost is shown


class TaskCounter(SchedulerPlugin):
    """Scheduler plugin: tasks submitted and finished since it was registered."""

    name = PLUGIN_NAME

    def __init__(self):
        self.submitted = 0
        self.finished = 0

    def transition(self, key, start, finish, *args, **kwargs):
        if start == "released" and finish in ("waiting", "queued", "processing", "no-worker"):
            self.submitted += 1
        elif finish in ("memory", "erred") and start in ("processing", "waiting", "queued"):
            self.finished += 1


def _read_counter(dask_scheduler=None):
    plugin = dask_scheduler.plugins.get(PLUGIN_NAME)
    return None if plugin is None else (plugin.submitted, plugin.finished)


class _SchedulerCounts:
    """(submitted, finished) read from the cluster's scheduler plugin."""

    def __init__(self, client):
        self.client = client
        if client.run_on_scheduler(_read_counter) is None:
            client.register_plugin(TaskCounter(), name=PLUGIN_NAME)

    def read(self):
        return self.client.run_on_scheduler(_read_counter) or (0, 0)

    def close(self):
        pass


class _LocalCounts:
    """(submitted, finished) of the graphs run by the threaded / synchronous scheduler."""

    def __init__(self):
        from dask.callbacks import Callback

        counts = self

        class _Counter(Callback):
            def _start_state(self, dsk, state):
                counts.submitted += sum(len(state[k]) for k in ("ready", "waiting", "running"))

            def _posttask(self, key, result, dsk, state, worker_id):
                counts.finished += 1

        self.submitted = self.finished = 0
        self._callback = _Counter()._callback
        self._closed = False
        register_callback(self._callback)

    def read(self):
        self._keep_registered()
        return self.submitted, self.finished

    def _keep_registered(self) -> None:
        """Register the callback again if graphs dropped it: dask's local scheduler swaps
        ``Callback.active`` for an empty set while a graph runs and puts its copy back after,
        so a user's own graphs overlapping in threads can put back a copy taken while
        another ran (daskauc's own graphs keep the set: :func:`daskauc._compute.compute`)."""
        if not self._closed and not callback_registered(self._callback):
            register_callback(self._callback)

    def close(self):
        # no error if the callback is gone already: a fit that finished must never be lost
        # to its progress bar
        self._closed = True
        unregister_callback(self._callback)


def _counts_source():
    """The task counter for the scheduler dask uses now (None if it cannot be read)."""
    from .._compute import distributed_client

    client = distributed_client()
    if client is None:
        return _LocalCounts(), None
    try:
        return _SchedulerCounts(client), client
    except Exception as exc:  # noqa: BLE001 - a scheduler without daskauc: bars show time only
        logger.debug("no task counts from the scheduler (%s): %s", type(exc).__name__, exc)
        return None, client


def dashboard_announced(link: str) -> None:
    """The dashboard link ``link`` was printed (by the command line, when it connects): the
    first bar on that cluster does not print it again."""
    with _lock:
        _announced.add(link)


def report(done: int, total: int | None = None, unit: str = "epoch") -> None:
    """A solver's own progress (``done`` of ``total`` epochs or steps) for the active bar."""
    with _lock:
        if _active:
            bar = _active[0]
            bar.outer = (int(done), None if total is None else int(total), unit)
            bar.segment_start()


def solver_log_level() -> int:
    """The level of a solver's per-step log lines (Newton steps, epochs): INFO, DEBUG while a
    model search runs (its candidates' lines say where it is; hundreds of inner steps, which
    the search repeats for every candidate, would bury them)."""
    return logging.DEBUG if _searches else logging.INFO


class SearchProgress:
    """A model search's progress: every candidate scored is logged at INFO with its
    validation AUC, the best so far, ``i/N`` and the time left, and shown on the active bar.

    ``N`` is the candidates the search plans (:meth:`expect` adds those it decides on while
    it runs); a search that stops early (a path past its best) says so in its last line. The
    time left is the mean time of a candidate so far times the candidates left: a bound that
    the early stops make pessimistic. Safe to call from the search's threads."""

    def __init__(self, name: str, total: int, *, unit: str = "candidate"):
        self.name, self.total, self.unit = name, int(total), unit
        self.done = 0
        self.best: tuple[str, float] | None = None
        self.tic = time.perf_counter()

    def expect(self, n: int, why: str = "") -> None:
        """``n`` more candidates than planned (a grid widened past an end), said in a line
        before they are counted."""
        with _lock:
            self.total += int(n)
            total = self.total
        logger.info("%s: %d more %s%s%s; %d in all", self.name, int(n), _plural(self.unit, n),
                    ": " if why else "", why, total)

    def left(self) -> float | None:
        """Seconds left at the mean pace so far (None before the first candidate)."""
        if not self.done:
            return None
        elapsed = time.perf_counter() - self.tic
        return elapsed / self.done * max(self.total - self.done, 0)

    def record(self, candidate: str, val_auc: float, detail: str = "", *,
               best: tuple[str, float] | None | str = "this") -> None:
        """One candidate scored: its description (``C=2^-5``), validation AUC and extra text.

        ``best``: what the search chooses on, when that is not the candidates' own AUC (a
        search over folds chooses on the mean over the folds: ``(description, mean)`` of the
        best complete candidate so far, or None before the first); by default the best of
        the candidates' AUCs."""
        with _lock:
            self.done += 1
            self.total = max(self.total, self.done)
            if best != "this":
                self.best = best
            elif self.best is None or val_auc > self.best[1]:
                self.best = (candidate, float(val_auc))
            elapsed, left = time.perf_counter() - self.tic, self.left()
            so_far = ("none complete yet" if self.best is None
                      else f"best {self.best[1]:.5f} at {self.best[0]}")
        logger.info("%s %d/%d: %s -> validation AUC %.5f%s (%s); %.1f s, %s", self.name,
                    self.done, self.total, candidate, val_auc, f" {detail}" if detail else "",
                    so_far, elapsed, f"~{left:.0f} s left" if left else "last candidate")

    def status(self) -> str:
        """``C path 5/26 best 0.98765`` for the bar."""
        best = f" best {self.best[1]:.5f}" if self.best is not None else ""
        return f"{self.name} {self.done}/{self.total}{best}"


@contextlib.contextmanager
def search_progress(name: str, total: int, *, unit: str = "candidate", chosen=None):
    """Run a model search under a :class:`SearchProgress` (yielded): the solvers' step lines
    drop to DEBUG meanwhile, and the last line says what was chosen (``chosen()``, a string)
    and in how long."""
    search = SearchProgress(name, total, unit=unit)
    logger.info("%s: %d %s to score", name, int(total), _plural(unit, total))
    with _lock:
        _searches.append(search)
    try:
        yield search
    finally:
        with _lock:
            _searches.remove(search)
    if search.best is None:  # it failed (or completed nothing) before its first candidate
        return
    stop = (f", stopped after {search.done} of {search.total} "
            f"{_plural(unit, search.total)}"
            if search.done < search.total else "")
    seconds = time.perf_counter() - search.tic
    if chosen is not None:
        logger.info("%s: chose %s in %.1f s%s", search.name, chosen(), seconds, stop)
    else:
        logger.info("%s: done in %.1f s%s; best validation AUC %.5f at %s", search.name,
                    seconds, stop, search.best[1], search.best[0])


def _plural(unit: str, n: int) -> str:
    """``unit`` for ``n`` of them: "C" stays "C", "candidate" -> "candidates", "(width,
    fold) path" -> "(width, fold) paths"."""
    return unit if int(n) == 1 or len(unit) < 3 else unit + "s"


def _bundle(line: str, frac: float | None) -> dict:
    """A bar as a notebook display bundle: an HTML progress element and the text line."""
    import html

    value = "" if frac is None else f' value="{frac:.3f}"'
    return {"text/plain": line,
            "text/html": f'<progress max="1"{value} style="width:16em"></progress> '
                         f"<code>{html.escape(line)}</code>"}


class Progress:
    """The state and drawing of one progress bar (use :func:`progress`)."""

    def __init__(self, label: str, stream=None):
        self.label = label
        self._stream = stream
        self.outer: tuple[int, int | None, str] | None = None
        self.tic = time.perf_counter()
        self.seconds: float | None = None
        self._counts, self._client = None, None
        self._base = (0, 0)
        self._last = (0, 0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False
        self._display = None  # the bar's display in a Jupyter notebook
        self._frac: float | None = None  # the bar's fraction, last drawn
        self.started = False

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stderr

    def _tty(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def _notebook_display(self):
        """An IPython display handle when this runs in a Jupyter kernel and draws on the
        default stream (a notebook's stderr is no terminal: the bar is a display that is
        updated in place instead), else None."""
        ipython = sys.modules.get("IPython")
        if self._stream is not None or ipython is None:
            return None
        shell = ipython.get_ipython()
        if shell is None or getattr(shell, "kernel", None) is None:
            return None
        from IPython.display import display

        return display(_bundle(self.text(), self._frac), raw=True, display_id=True)

    def start(self) -> None:
        self._counts, self._client = _counts_source()
        if self._client is not None and self._client.dashboard_link not in _announced:
            _announced.add(self._client.dashboard_link)
            self.write_line(f"Dask dashboard: {self._client.dashboard_link}")
        if self._counts is not None:
            self._base = self._last = self._counts.read()
        self._display = self._notebook_display()
        if self._display is not None or self._tty():
            self._thread = threading.Thread(target=self._run, name="daskauc-progress",
                                            daemon=True)
            self._thread.start()
        else:
            self.write_line(f"[daskauc] {self.label} ...")
        self.started = True

    def _run(self) -> None:
        while not self._stop.wait(REFRESH):
            self.draw()

    def segment_start(self) -> None:
        """The solver reported an epoch or step: the task count starts again from here."""
        if self._counts is not None:
            with contextlib.suppress(Exception):
                self._last = self._counts.read()
        self._base = self._last

    def text(self) -> str:
        """``[daskauc] label  epoch 3/20  |#####...| 12/40 tasks  8.1 s, ~40 s left``: the
        bar is the solver's own count with the current epoch's tasks as its fraction, or the
        tasks since the last reported step when the solver gives no total."""
        parts = [f"[daskauc] {self.label}"]
        with _lock:
            search = _searches[-1] if _searches else None
        if search is not None:
            parts.append(search.status())
        done, total, unit = self.outer if self.outer is not None else (0, None, "")
        if self.outer is not None:
            parts.append(f"{unit} {done}/{total}" if total else f"{unit} {done}")
        tasks_frac = None
        if self._counts is not None:
            with contextlib.suppress(Exception):  # a lost scheduler: keep the last counts
                self._last = self._counts.read()
            submitted = self._last[0] - self._base[0]
            finished = self._last[1] - self._base[1]
            if submitted > 0:
                tasks_frac = min(1.0, finished / submitted)
                task_text = f"{finished}/{submitted} tasks"
        frac = tasks_frac
        if total:
            frac = min(1.0, (done + (tasks_frac or 0.0) * (done < total)) / total)
        elapsed = time.perf_counter() - self.tic
        self._frac = frac
        if frac is not None:
            width = 24
            filled = int(round(frac * width))
            bar = f"|{'#' * filled}{'.' * (width - filled)}|"
            parts.append(bar + (f" {task_text}" if tasks_frac is not None else ""))
        timing = f"{elapsed:.1f} s"
        if search is not None:
            left = search.left()
            timing += f", ~{left:.0f} s left in the search" if left else ""
        elif total and 0 < done < total:
            timing += f", ~{elapsed / frac - elapsed:.0f} s left"
        parts.append(timing)
        return "  ".join(parts)

    def draw(self) -> None:
        if self._display is not None:
            with _lock:
                self._display.update(_bundle(self.text(), self._frac), raw=True)
            return
        line = self.text()
        with _lock:
            self.stream.write("\r\x1b[K" + line)
            self.stream.flush()
            self._drawn = True

    def clear(self) -> None:
        """Erase the bar so that a log line can be printed (it is redrawn after)."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False

    def write_line(self, line: str) -> None:
        with _lock:
            self.clear()
            self.stream.write(line + "\n")
            self.stream.flush()

    def finish(self, failed: bool) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.seconds = time.perf_counter() - self.tic
        if self._counts is not None:
            self._counts.close()
        with _lock:
            self.clear()
        end = f"[daskauc] {self.label}: {'failed after' if failed else 'done in'} " \
              f"{self.seconds:.2f} s"
        if self._display is not None:  # the notebook's bar becomes the end line
            with _lock:
                self._display.update(_bundle(end, None if failed else 1.0), raw=True)
        elif not failed:
            self.write_line(end)


class StderrHandler(logging.Handler):
    """daskauc's log records on the current ``sys.stderr``, above the active bar if any."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("[daskauc] %(message)s"))

    def emit(self, record):
        try:
            line = self.format(record)
            with _lock:
                bar = _active[0] if _active and _active[0].started else None
                if bar is not None:
                    bar.write_line(line)
                else:
                    sys.stderr.write(line + "\n")
                    sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging must never break the computation
            self.handleError(record)


def log_to_stderr(level: int = logging.INFO) -> StderrHandler:
    """Print daskauc's log lines at ``level`` and above on stderr (once; returns the handler).

    The Python API logs one line per epoch or Newton step at INFO, like dask-ml, and prints
    nothing until a handler is configured; this is the short way to configure one."""
    handler = next((h for h in logger.handlers if isinstance(h, StderrHandler)), None)
    if handler is None:
        handler = StderrHandler()
        logger.addHandler(handler)
    logger.setLevel(level)
    return handler


@contextlib.contextmanager
def progress(label: str = "working", *, stream=None, log: bool = True):
    """Show a progress bar (and daskauc's log lines) while the block runs.

    Parameters
    ----------
    label : what the step is, shown at the start of the bar.
    stream : where to draw (default: ``sys.stderr`` at the time of each write).
    log : also print daskauc's INFO log lines (epochs, Newton steps) above the bar.

    Nested uses draw only the outermost bar. Yields the :class:`Progress`, whose
    ``seconds`` holds the step's duration when the block ends.

    Examples
    --------
    >>> with daskauc.progress("fit NSAUC"):                       # doctest: +SKIP
    ...     model = daskauc.NSAUC().fit("train-emb.zarr")
    """
    bar = Progress(label, stream)
    with _lock:
        outermost = not _active
        _active.append(bar)
    handler = None
    log_level = logger.level
    failed = True
    try:
        if outermost:
            bar.start()
            if log and not any(isinstance(h, StderrHandler) for h in logger.handlers):
                handler = log_to_stderr(min(logging.INFO, logger.getEffectiveLevel()))
        yield bar
        failed = False
    finally:
        with _lock:
            _active.remove(bar)
        if handler is not None:
            logger.removeHandler(handler)
            logger.setLevel(log_level)
        if outermost:
            bar.finish(failed)
        else:
            bar.seconds = time.perf_counter() - bar.tic
