"""Which ranks run on which node: the line a job script reads to name the
ranks of a node that was lost (jobs/mpi_quiet.sh)."""


def ranges(ranks):
    """[0, 1, 2, 5] -> '0-2,5'."""
    runs = []
    for rank in ranks:
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    return ','.join(str(a) if a == b else '{}-{}'.format(a, b)
                    for a, b in runs)


def node_ranks(mpi_comm):
    """One line naming the ranks on each node, in rank order, gathered from
    every worker: ``nodes: node1 ranks 0-1, node2 ranks 2-3``."""
    from mpi4py import MPI
    hosts = mpi_comm.allgather(MPI.Get_processor_name())
    ranks = {}
    for rank, host in enumerate(hosts):
        ranks.setdefault(host, []).append(rank)
    return 'nodes: ' + ', '.join('{} ranks {}'.format(host, ranges(r))
                                 for host, r in ranks.items())
