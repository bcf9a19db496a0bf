#!/usr/bin/env python
"""Export a trained model (model.npz or a snapshot) as an ONNX graph.

    python export_onnx.py MODEL OUT.onnx [--force]

The graph (:mod:`models.onnx_export`) takes float32 images preprocessed as
the model's metadata says and returns logits; ``onnx`` (the ``onnx`` extra)
writes it, and any ONNX runtime runs it. An existing OUT is replaced only
with ``--force``, never where it is MODEL or no regular file
(:mod:`largebatch.outputs`).
"""
import argparse
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)

from largebatch import console
from largebatch import outputs
from largebatch.errors import InputError
import models
from models.onnx_export import to_onnx


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('model', help='model.npz or a snapshot')
    parser.add_argument('out', help='the .onnx file to write')
    parser.add_argument('--force', action='store_true',
                        help='replace OUT if it exists')
    args = parser.parse_args(argv)
    console.print_any_text()
    try:
        outputs.refuse_existing(args.out, args.force, [args.model])
        network, metadata = models.saved_model.load(args.model)
        onnx = import_onnx()
        graph = to_onnx(network, metadata)
        with outputs.replacing(args.out, args.force, [args.model]) as tmp:
            onnx.save(graph, tmp)
    except outputs.OutputError as e:
        fail('{}{}'.format(e, '; --force replaces it' if e.replaceable
                           else ''))
    except InputError as e:
        fail(e)
    except OSError as e:
        fail('{}: {}'.format(args.out, e.strerror or e))
    print('wrote', args.out)


def import_onnx():
    """The onnx package (the onnx extra), or the script's one line."""
    try:
        import onnx
    except ImportError:
        fail("the onnx package is not installed; pip install -e '.[onnx]'")
    return onnx


def fail(message):
    print('export_onnx.py: error: {}'.format(message), file=sys.stderr)
    sys.exit(2)


if __name__ == '__main__':
    main()
