"""Rank 0's parameters to every worker before the first update."""


def broadcast_initial_parameters(optimizer, model, comm):
    """Broadcast rank 0's parameters now, so the first update is a real one.

    ChainerMN's multi-node optimizer spends the first ``update()`` after a
    start (or a resume) broadcasting instead of updating; doing the broadcast
    up front keeps every iteration an update and makes a resumed run follow
    the uninterrupted one step for step.
    """
    comm.bcast_data(model)
    optimizer.is_changed(model)  # records the parameter set as broadcast
