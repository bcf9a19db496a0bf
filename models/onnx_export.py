"""The plain ResNet-50 of model.npz as a standard ONNX graph.

Chainer 7 has no ONNX export, and onnx-chainer (its only release, 1.6.0)
installs neither with today's ``onnx`` nor with Chainer 7, so the graph is
written here with the ``onnx`` package: Conv, BatchNormalization (the test
mode statistics: for final-batch BN, the workers' averaged last-batch
statistics), Relu, Add, MaxPool (``ceil_mode``, as Chainer's ``cover_all``),
GlobalAveragePool, Flatten and Gemm, opset 17. The input is ``images``
(N, 3, H, W) float32, preprocessed as the model's metadata says (also in
the graph's ``metadata_props``); the output ``logits`` (N, classes).
"""
import json

import numpy

#: The ONNX operator set the graph uses.
OPSET = 17


def to_onnx(network, metadata):
    """The ``onnx.ModelProto`` of ``network`` (a plain
    :class:`models.ResNet50` on the CPU) with ``metadata`` (model.npz's)
    in its ``metadata_props``."""
    import onnx
    from onnx import helper
    graph = _Graph()
    h = graph.conv_bn(network.conv1, network.bn1, 'images', relu=True)
    h = graph.node('MaxPool', [h], kernel_shape=[3, 3], strides=[2, 2],
                   ceil_mode=1)
    for block in (network.res2, network.res3, network.res4, network.res5):
        for bottleneck in block:
            h = graph.bottleneck(bottleneck, h)
    h = graph.node('GlobalAveragePool', [h])
    h = graph.node('Flatten', [h], axis=1)
    fc = network.fc
    graph.node('Gemm', [h, graph.constant(fc.W.array),
                        graph.constant(fc.b.array)], transB=1,
               output='logits')
    n_class = fc.W.shape[0]
    model = helper.make_model(
        helper.make_graph(
            graph.nodes, 'resnet50',
            [helper.make_tensor_value_info(
                'images', onnx.TensorProto.FLOAT, ['N', 3, 'H', 'W'])],
            [helper.make_tensor_value_info(
                'logits', onnx.TensorProto.FLOAT, ['N', n_class])],
            graph.initializers),
        opset_imports=[helper.make_opsetid('', OPSET)],
        producer_name='chainer-largebatch-resnet50')
    for key, value in sorted(metadata.items()):
        if isinstance(value, numpy.ndarray):
            value = value.tolist()
        entry = model.metadata_props.add()
        entry.key, entry.value = key, json.dumps(value)
    onnx.checker.check_model(model)
    return model


class _Graph(object):
    """Nodes and initializers, named in the order they are added."""

    def __init__(self):
        self.nodes, self.initializers = [], []

    def name(self, prefix):
        return '{}_{}'.format(prefix, len(self.nodes) + len(
            self.initializers))

    def constant(self, array):
        from onnx import numpy_helper
        name = self.name('w')
        self.initializers.append(numpy_helper.from_array(
            numpy.asarray(array, numpy.float32), name))
        return name

    def node(self, op, inputs, output=None, **attributes):
        from onnx import helper
        output = output or self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [output],
                                           **attributes))
        return output

    def conv_bn(self, conv, bn, x, relu=False):
        kh, kw = conv.W.shape[2:]
        sh, sw = _pair(conv.stride)
        ph, pw = _pair(conv.pad)
        h = self.node('Conv', [x, self.constant(conv.W.array)],
                      kernel_shape=[kh, kw], strides=[sh, sw],
                      pads=[ph, pw, ph, pw])
        h = self.node('BatchNormalization', [
            h, self.constant(bn.gamma.array), self.constant(bn.beta.array),
            self.constant(bn.avg_mean), self.constant(bn.avg_var)],
            epsilon=float(bn.eps))
        return self.node('Relu', [h]) if relu else h

    def bottleneck(self, block, x):
        h = self.conv_bn(block.conv1, block.bn1, x, relu=True)
        h = self.conv_bn(block.conv2, block.bn2, h, relu=True)
        h = self.conv_bn(block.conv3, block.bn3, h)
        shortcut = (self.conv_bn(block.conv4, block.bn4, x)
                    if block.projection else x)
        return self.node('Relu', [self.node('Add', [h, shortcut])])


def _pair(value):
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return value, value
