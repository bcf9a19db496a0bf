#!/usr/bin/env python
"""Export a trained model (model.npz or a snapshot) as an ONNX graph.

    python export_onnx.py MODEL OUT.onnx

The graph (:mod:`models.onnx_export`) takes float32 images preprocessed as
the model's metadata says and returns logits; ``onnx`` (the ``onnx`` extra)
writes it, and any ONNX runtime runs it.
"""
import argparse
import os
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)

from largebatch import console
from largebatch.errors import InputError
import models
from models.onnx_export import to_onnx


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('model', help='model.npz or a snapshot')
    parser.add_argument('out', help='the .onnx file to write')
    args = parser.parse_args(argv)
    console.print_any_text()
    try:
        import onnx
    except ImportError:
        print("export_onnx.py: error: the onnx package is not installed; "
              "pip install -e '.[onnx]'", file=sys.stderr)
        sys.exit(2)
    try:
        network, metadata = models.saved_model.load(args.model)
    except InputError as e:
        print('export_onnx.py: error: {}'.format(e), file=sys.stderr)
        sys.exit(2)
    tmp = os.path.join(os.path.dirname(os.path.abspath(args.out)),
                       '.{}.tmp{}'.format(os.path.basename(args.out),
                                          os.getpid()))
    try:
        onnx.save(to_onnx(network, metadata), tmp)
        os.replace(tmp, args.out)
    except OSError as e:
        print('export_onnx.py: error: {}: {}'.format(args.out, e.strerror),
              file=sys.stderr)
        sys.exit(2)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    print('wrote', args.out)


if __name__ == '__main__':
    main()
