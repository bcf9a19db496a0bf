"""Softmax cross-entropy against label-smoothed targets (Szegedy et al. 2016).

With targets ``(1 - eps) onehot(t) + eps / K`` over ``K`` classes the loss is

    (1 - eps) * CE(y, t) + eps * mean_k(-log softmax(y)_k)

averaged over the batch. Mikami et al. (2018), Ying et al. (2018) and every
MLPerf ResNet-50 train with ``eps = 0.1``; evaluation keeps plain
cross-entropy.
"""
import chainer.functions as F


def label_smoothed_cross_entropy(y, t, eps=0.1):
    """The loss above for logits ``y`` (N, K) and labels ``t`` (N,)."""
    loss = F.softmax_cross_entropy(y, t)
    if eps == 0:
        return loss
    uniform = -F.mean(F.log_softmax(y))
    return (1 - eps) * loss + eps * uniform
