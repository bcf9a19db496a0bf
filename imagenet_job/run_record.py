"""What a run was started with, where log viewers look for it.

``OUT/args`` holds the flags of the run's newest start as one JSON object,
the file ChainerUI reads beside ``OUT/log``; ``OUT/args.json`` the history
of its starts, one entry per start (the first, then each resume): the
time, the host and worker count, the command line, every flag resolved,
the recipe and the snapshot it resumed from. Both are written atomically.
"""
import json
import os
import socket
import sys
import time

from imagenet_job import snapshot_files
from largebatch import outputs


def record_start(out, flags, recipe, workers, resumed_from):
    """Write ``OUT/args`` and add this start to ``OUT/args.json``.

    Args:
        flags (dict): every flag's value after the defaults were resolved.
        recipe (dict): the resolved recipe.
        workers (int): the number of workers.
        resumed_from: the snapshot path, or None.
    """
    history = []
    path = os.path.join(out, 'args.json')
    if snapshot_files.is_regular(path):
        try:
            with open(path) as f:
                history = json.load(f)
        except ValueError:
            history = []
    if not isinstance(history, list):
        history = []
    history.append({
        'started': time.strftime('%Y-%m-%d %H:%M:%S %Z'),
        'host': socket.gethostname(), 'workers': workers,
        'command': sys.argv, 'resumed_from': resumed_from,
        'flags': flags, 'recipe': recipe})
    _write_json(out, 'args', flags)
    _write_json(out, 'args.json', history)


def _write_json(out, name, value):
    outputs.write_replacing(os.path.join(out, name), lambda f: json.dump(
        value, f, indent=1, sort_keys=True, default=str), force=True,
        text=True)
