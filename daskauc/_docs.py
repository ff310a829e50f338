"""Parameter descriptions shared by several estimators, written once.

A docstring names one by a line holding only ``%(name)s``; :func:`fill_doc` replaces that line
by the description, indented as the line was, its ``{field}`` parts filled from the keyword
arguments (a missing field fails at import, not in the rendered docs).
"""

from __future__ import annotations

import re
import textwrap

#: how the solvers that stand their chains for the sequential run combine them (the
#: ``combine`` field of ``n_chains``)
CHAIN_FRAME = (
    "each chain's steps stand for its share of the sequential run (scaled to it in the first "
    "round, then the sequential steps plus the other chains' expected move), the chains' "
    "iterates are mixed by steps")

#: name -> (the numpydoc header line, the description's text)
PARAMETERS = {
    "n_chains": (
        'n_chains : int >= 1 or "auto", default {default}',
        'Chains run in parallel over shares of the chunks each epoch, combined at the end of '
        'every epoch (:mod:`daskauc.engine.chains`{combine}). "auto" is one chain per worker '
        'thread of the current scheduler, or fewer where more do not pay: data in one chunk, '
        'or too small for the cost of combining them (:func:`daskauc.engine.cost.chain_count`). '
        '1 is the sequential algorithm, bit for bit; more chains use more workers and give a '
        'close, not identical, result.{note}'),
    "class_weight": (
        'class_weight : None, "balanced" or dict {{label: weight}}, default None',
        "Weights of the classes in the calibration that ends the fit, as in scikit-learn's "
        "``LogisticRegression``: they move the threshold of ``predict`` and the "
        "probabilities of ``predict_proba``; the ranking (``decision_function`` up to a "
        "constant, and so the AUC) is the same with any weights. The AUC losses weigh every "
        "(positive, negative) pair once, so weights per class would only multiply the loss "
        "by their product, the same as a larger C or a smaller lam: see :ref:`class weights "
        '<class-weights>`. "balanced" weighs a class by ``n / (2 n_class)``; labels as in '
        "``y`` (raw labels for a store)."),
    "sync_every": (
        "sync_every : int or None, default None",
        "With several chains, combine them after every ``sync_every`` chunks of each chain "
        "instead of once per epoch."),
}

_LINE = re.compile(r"(\s*)%\((\w+)\)s\s*")
_LITERAL = re.compile(r"``.+?``")


def fill_doc(**fields):
    """Class or function decorator: fill its docstring's ``%(name)s`` lines (see module)."""

    def decorate(obj):
        obj.__doc__ = filled(obj.__doc__, **fields)
        return obj

    return decorate


def filled(doc: str, **fields) -> str:
    out = []
    for line in doc.split("\n"):
        match = _LINE.fullmatch(line)
        if match is None or match.group(2) not in PARAMETERS:
            out.append(line)
            continue
        indent = match.group(1)
        head, text = PARAMETERS[match.group(2)]
        out.append(indent + head.format(**fields))
        # an inline literal is never broken across lines
        text = _LITERAL.sub(lambda m: m.group(0).replace(" ", "\0"), text.format(**fields))
        out.extend(line.replace("\0", " ") for line in textwrap.wrap(
            text, width=92 - len(indent), initial_indent=indent + "    ",
            subsequent_indent=indent + "    ", break_on_hyphens=False))
    return "\n".join(out)
