"""What every subcommand shares: reading option values, storage options, the log and step
lines, the result on stdout, and the checks of outputs before any work."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os

logger = logging.getLogger("daskauc")


def _int_or_auto(text: str):
    return text if text == "auto" else int(text)



def _float_or_auto(text: str):
    return text if text == "auto" else float(text)



def _parse_value(text: str):
    """A --param or --positive value: JSON, else the text. A dict's keys, which JSON makes
    text, are read the same way (``class_weight={"1": 10}`` names the label 1 as
    ``--positive 1`` does: no spelling reached a numeric label)."""
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict):
        keys = {}
        for k in value:
            keys.setdefault(_parse_value(k), []).append(k)
        twice = next((ks for ks in keys.values() if len(ks) > 1), None)
        if twice:  # "1" and "1.0" are one number
            raise argparse.ArgumentTypeError(
                f"the keys {' and '.join(map(repr, twice))} of {text} name one value")
        return {_parse_value(k): v for k, v in value.items()}
    return value



def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"a JSON object {{...}} is expected, got {text!r}")
    return value



def _strings(value) -> list[str]:
    """The strings in an argument's value (a list of them, or --also's pairs)."""
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []



@contextlib.contextmanager
def _storage_options(args):
    """``--storage-options``: fsspec's defaults for the protocols of the command's URLs, in
    this process (``fsspec.config.conf``, which every fsspec filesystem daskauc opens
    applies) and in the local cluster's workers (``FSSPEC_<PROTOCOL>``, read when they
    start); both as before at the end. The workers of a cluster given by --scheduler read
    from and write to the URLs with the options that travel with each task."""
    options = getattr(args, "storage_options", None)
    if not options:
        yield
        return
    import fsspec.config
    from fsspec.registry import known_implementations, registry

    protocols = {u.split("://", 1)[0] for u in _urls(args)} & {*known_implementations,
                                                               *registry}
    saved = {p: (fsspec.config.conf.get(p), os.environ.get(f"FSSPEC_{p.upper()}"))
             for p in protocols}
    try:
        for p in protocols:
            fsspec.config.conf[p] = {**fsspec.config.conf.get(p, {}), **options}
            os.environ[f"FSSPEC_{p.upper()}"] = json.dumps(fsspec.config.conf[p])
        yield
    finally:
        for p, (conf, env) in saved.items():
            for mapping, key, value in ((fsspec.config.conf, p, conf),
                                        (os.environ, f"FSSPEC_{p.upper()}", env)):
                if value is None:
                    mapping.pop(key, None)
                else:
                    mapping[key] = value



def _urls(args) -> list[str]:
    """The URLs among the command's arguments (its stores and files on object storage)."""
    from ..store.protocol import is_url

    return [u for k, v in vars(args).items() if k != "scheduler" for u in _strings(v)
            if is_url(u)]



def _log(line: str) -> None:
    """A status line: the daskauc logger, which the CLI prints on stderr (results go to
    stdout), above a progress bar if one is drawn."""
    logger.info("%s", line)



def _step(name: str, timings: dict | None = None):
    """A progress bar for one step; its duration goes into ``timings``."""
    from ..engine.progress import progress

    @contextlib.contextmanager
    def step():
        with progress(name) as bar:
            yield bar
        if timings is not None:
            timings[name] = bar.seconds

    return step()



def _result(args, payload: dict, text: str) -> None:
    """A command's result on stdout: ``text`` for people, or one JSON object with --json."""
    print(json.dumps(payload) if args.json else text, flush=True)



def _check_outputs(args, *paths, kind: str, inputs=(), expected_bytes=None,
                   overwrite: bool | None = None) -> None:
    """Everything knowable about the outputs before any work (and before a cluster starts):
    none is an input or another output, none replaces something unasked or of another kind,
    each can be written (its directory, the free space when the size is known)."""
    from ..store.protocol import resolve_path
    from ..store.write import check_output

    seen: dict[str, str] = {}
    for path in paths:
        target = resolve_path(path)
        if target in seen:
            raise ValueError(f"{path} is given as two outputs of this command; choose "
                             "different paths")
        seen[target] = path
        check_output(path, kind=kind, inputs=inputs, expected_bytes=expected_bytes,
                     overwrite=args.overwrite if overwrite is None else overwrite)



def _check_plot(path: str | None, overwrite: bool) -> None:
    """A --plot target: matplotlib importable, a known image type, not overwritten unasked."""
    if path is None:
        return
    from ..plot import pyplot

    try:
        pyplot()
    except ImportError as exc:
        raise ValueError(f"--plot: {exc}") from None
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".pdf", ".svg", ".jpg", ".jpeg"):
        raise ValueError(f"--plot {path}: use a .png, .pdf, .svg or .jpg file name")
    _check_file_output(path, overwrite, "--plot")



def _check_file_output(path: str, overwrite: bool, option: str) -> None:
    """An output that is a plain file (a figure, a scheduler file): not replaced unasked,
    not a directory, its directory writable."""
    from ..store.write import check_directory

    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{option} {path} is a directory")
    check_directory(os.path.abspath(path))



def _save_figure(ax, path: str) -> None:
    import matplotlib.pyplot as plt

    fig = (ax[0] if isinstance(ax, (list, tuple)) else ax).figure
    fig.savefig(path, dpi=120)
    plt.close(fig)
    _log(f"figure written to {path}")
