"""imagenet_job.nodes: the line naming each node's ranks."""
from fake_comm import FakeComm
from imagenet_job import nodes


def test_node_ranks_names_each_nodes_ranks_in_order():
    from mpi4py import MPI
    here = MPI.Get_processor_name()
    comm = FakeComm(0, ['n2', 'n2', 'n3', 'n2', here])
    assert nodes.node_ranks(comm.mpi_comm) == (
        'nodes: {0} ranks 0,5, n2 ranks 1-2,4, n3 ranks 3'.format(here))
