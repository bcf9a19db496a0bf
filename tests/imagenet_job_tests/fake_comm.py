"""A stand-in for a ChainerMN communicator, for the job's tests."""


class FakeComm(object):
    """A ChainerMN communicator of rank ``rank`` whose ``mpi_comm.allgather``
    returns what every rank gave: this one's, and ``others`` in rank order.
    """

    def __init__(self, rank, others):
        self.rank = rank
        self.mpi_comm = self
        self.others = list(others)
        self.gathered = []

    def allgather(self, value):
        self.gathered.append(value)
        return self.others[:self.rank] + [value] + self.others[self.rank:]
